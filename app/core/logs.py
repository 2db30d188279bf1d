"""Log output: text for a terminal or JSON lines for a collector (`LOOM_LOG_FORMAT`).

A JSON line is one object: `time`, `level`, `logger`, `message`, `request_id` (of the
request being served, from `REQUEST_ID`), the access fields `method`, `route`, `status`,
`duration_ms` where the record has them (`app.core.request_context`), and `exc` with a
traceback. Nothing here logs headers, keys or bodies; the access line names the route
template, never the raw path or query (which can hold search text).
"""

from __future__ import annotations

import logging
import logging.config
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

# the id of the request this task serves (set by app.core.request_context)
REQUEST_ID: ContextVar[str | None] = ContextVar("loom_request_id", default=None)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# extra= fields of a record that go into its JSON line
ACCESS_FIELDS = ("method", "route", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id is not None:
            line["request_id"] = request_id
        for name in ACCESS_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


class QuietCron(logging.Filter):
    """Drops arq's INFO lines about cron runs (four every 30 s: the sweeps that find nothing
    to do would push everything else off a terminal). Job runs, warnings and errors stay;
    LOOM_LOG_LEVEL=debug shows the cron lines too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "arq.worker" or record.levelno != logging.INFO:
            return True
        if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
            return True
        return "cron:" not in record.getMessage()


class QuietHealth(logging.Filter):
    """Text logs only: drops arq's INFO "recording health: j_complete=... queued=..." line,
    which a busy worker writes every 10 s (the same counters are in its /metrics and in
    `GET /v1/jobs`). JSON logs keep it for machines; LOOM_LOG_LEVEL=debug shows it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "arq.worker" or record.levelno != logging.INFO:
            return True
        if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
            return True
        return not record.getMessage().startswith("recording health")


class QuietJobs(logging.Filter):
    """Text logs on a terminal: drops arq's INFO lines per job run (`  0.02s → id:fn()`,
    `  0.05s ← id:fn ● None`, a retry `↻`, an abort `⊘`): two or more per job would fill
    `serve`'s terminal. The log file (`LOOM_LOG_FILE`) and JSON logs keep them; failures
    (warnings, errors) and LOOM_LOG_LEVEL=debug show everywhere."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "arq.worker" or record.levelno != logging.INFO:
            return True
        if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
            return True
        return not str(record.msg).startswith("%6.2fs ")


class NoAccess(logging.Filter):
    """Text logs on a terminal: drops the access lines (logger `loom.access`), which go to
    the log file (`LOOM_LOG_FILE`) only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "loom.access"


def dict_config(log_format: str, level: str, log_file: Path | str | None = None) -> dict[str, Any]:
    """A `logging.config.dictConfig` document: every logger (uvicorn's too) writes through
    one stderr handler in `log_format`, and with `log_file` through a handler appending to
    that file too (the access lines of text mode go there only). `serve` hands it to
    uvicorn, whose API processes apply it on start."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    )
    root_level = logging.getLevelNamesMapping().get(level.upper(), logging.DEBUG)
    loggers: dict[str, Any] = {
        name: {"handlers": [], "propagate": True}
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
    }
    # the MCP SDK (app.mcp) says at INFO that its session manager starts and stops, and
    # "Terminating session: None" after every stateless request; debug keeps it all
    loggers["mcp"] = {
        "level": root_level if root_level <= logging.DEBUG else max(root_level, logging.WARNING)
    }
    # Alembic says at INFO each plugin it loads (on import, in every process) and each
    # migration it runs, about 30 lines: `migrate` says what it did in one line instead;
    # debug keeps them, and `serve` on the embedded stores sends them to its log file
    # (launcher.startup.quiet_store_logs)
    loggers["alembic"] = {
        "level": root_level if root_level <= logging.DEBUG else max(root_level, logging.WARNING)
    }
    quiet = ["quiet_cron"] + (["quiet_health"] if log_format == "text" else [])
    handlers: dict[str, Any] = {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "loom",
            "stream": "ext://sys.stderr",
            "filters": quiet + (["no_access", "quiet_jobs"] if log_format == "text" else []),
        }
    }
    if log_file is not None:
        # appended to by every process (O_APPEND: their lines do not interleave)
        handlers["file"] = {
            "class": "logging.FileHandler",
            "formatter": "loom",
            "filename": str(log_file),
            "filters": quiet,
        }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"loom": formatter},
        "filters": {
            "quiet_cron": {"()": f"{__name__}.QuietCron"},
            "quiet_health": {"()": f"{__name__}.QuietHealth"},
            "no_access": {"()": f"{__name__}.NoAccess"},
            "quiet_jobs": {"()": f"{__name__}.QuietJobs"},
        },
        "handlers": handlers,
        # uvicorn's `trace` (below DEBUG) is no level of the logging module's
        "root": {"handlers": list(handlers), "level": root_level},
        # uvicorn's loggers keep no handlers of their own: their records reach the root's
        "loggers": loggers,
    }


def configure(log_format: str, level: str, log_file: Path | str | None = None) -> None:
    """Set up this process's logging (the command line calls it first thing)."""
    logging.config.dictConfig(dict_config(log_format, level, log_file))
