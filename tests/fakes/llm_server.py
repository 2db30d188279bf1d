"""A fake LLM HTTP server for tests: Anthropic Messages API and OpenAI chat completions.

The real `anthropic` / `openai` SDKs talk to it over loopback, so tests exercise the
actual request building, retries, timeouts and response parsing of the SDKs.

Behaviour is scripted from the test thread:

    fake.respond_with("a summary")                 # every request answers this text
    fake.respond_with(lambda req: req.text[:20])   # computed from the recorded request
    fake.script(Fail(529), Reply("ok"))            # first request 529, second "ok", then default
    fake.hang()                                    # every request hangs until reset()/release()
    fake.script(Empty(), Malformed("json"))
    fake.script(ToolUse({"facts": []}))            # a tool_use answer (structured output)
    fake.respond_with_tools(lambda req: {...})     # tool input computed per request

Every request is recorded in `fake.requests` (path, headers, JSON body, provider).
The server runs uvicorn in a daemon thread with its own event loop, so it also serves
subprocesses (e.g. an arq worker started by a test) while the test's loop is busy.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_COVERS = re.compile(r"covers msg:(\d+)-(\d+)")


@dataclass
class RecordedRequest:
    """One request the fake received."""

    provider: str  # "anthropic" | "openai"
    path: str
    headers: dict[str, str]
    json: Any
    received_at: float = field(default_factory=time.monotonic)

    @property
    def system(self) -> str:
        """The system prompt of the request (either provider's shape)."""
        body = self.json if isinstance(self.json, dict) else {}
        if self.provider == "anthropic":
            system = body.get("system", "")
            if isinstance(system, list):
                return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
            return str(system or "")
        for msg in body.get("messages", []):
            if msg.get("role") == "system":
                return str(msg.get("content", ""))
        return ""

    @property
    def text(self) -> str:
        """All user-message text of the request, joined."""
        body = self.json if isinstance(self.json, dict) else {}
        parts: list[str] = []
        for msg in body.get("messages", []):
            if msg.get("role") != "user":
                continue
            content = msg.get("content", "")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts.extend(b.get("text", "") for b in content if isinstance(b, dict))
        return "\n".join(parts)

    @property
    def tool_name(self) -> str | None:
        """The tool the request forces (`tool_choice`), if any."""
        body = self.json if isinstance(self.json, dict) else {}
        choice = body.get("tool_choice") or {}
        if not isinstance(choice, dict):
            return None
        if self.provider == "anthropic":
            return choice.get("name")
        fn = choice.get("function") or {}
        return fn.get("name") if isinstance(fn, dict) else None

    @property
    def covers(self) -> tuple[int, int] | None:
        """The `covers msg:a-b` range named in the prompt, if any."""
        m = _COVERS.search(self.text)
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def covered(self) -> tuple[int, int]:
        """`covers` of a request that must name one (a summary request)."""
        covers = self.covers
        assert covers is not None, "the request names no `covers msg:a-b`"
        return covers


# --- actions -------------------------------------------------------------------------


@dataclass
class Reply:
    """Answer 200 with this text (or the text a callable computes from the request)."""

    text: str | Callable[[RecordedRequest], str]
    stop_reason: str = "end_turn"


@dataclass
class Fail:
    """Answer with an error status (500 api_error, 529 overloaded, 429, 401 ...)."""

    status: int = 500
    message: str = "fake failure"


@dataclass
class Hang:
    """Do not answer for `seconds` (None: until `release()` / `reset()`), then reply."""

    seconds: float | None = None
    then: Reply | ToolUse | None = None


@dataclass
class Empty:
    """Answer 200 with no text: no content blocks (or an empty string when `blank`)."""

    blank: bool = False


@dataclass
class Malformed:
    """Answer 200 with broken content: `json` = not JSON, `shape` = JSON without content."""

    kind: str = "json"


@dataclass
class ToolUse:
    """Answer 200 with one tool call of the requested (forced) tool: `input` as its input
    (or computed from the request). Anthropic `tool_use` block; OpenAI `tool_calls`."""

    input: Any | Callable[[RecordedRequest], Any]
    delay: float = 0.0  # seconds to wait first (a slowed model)


Action = Reply | Fail | Hang | Empty | Malformed | ToolUse


def default_text(req: RecordedRequest) -> str:
    """The default answer: a deterministic summary naming the range it was asked about."""
    covers = req.covers
    tag = f" covers msg:{covers[0]}-{covers[1]}" if covers else ""
    return f"FAKE LLM SUMMARY{tag}: the user and the assistant discussed the task."


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeLLMServer:
    """Loopback server speaking the Anthropic and OpenAI chat APIs; see module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[Action] = []
        self._default: Action = Reply(default_text)
        self._release = threading.Event()
        self._ids = itertools.count(1)
        self.requests: list[RecordedRequest] = []
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # --- addresses -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Anthropic base URL (the SDK appends /v1/messages)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """OpenAI-compatible base URL (the SDK appends /chat/completions)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting -------------------------------------------------------------------

    def respond_with(self, text: str | Callable[[RecordedRequest], str]) -> None:
        """Answer every (unscripted) request with this text or callable of the request."""
        self.set_default(Reply(text))

    def respond_with_tools(self, fn: Callable[[RecordedRequest], Any], delay: float = 0.0) -> None:
        """Answer every (unscripted) request with a call of its forced tool, input `fn(req)`."""
        self.set_default(ToolUse(fn, delay))

    def set_default(self, action: Action) -> None:
        """Behaviour for requests once the scripted queue is empty."""
        with self._lock:
            self._default = action

    def script(self, *actions: Action) -> None:
        """Queue actions consumed one per request, before the default behaviour."""
        with self._lock:
            self._queue.extend(actions)

    def fail(self, status: int = 500) -> None:
        """Fail every request with this status."""
        self.set_default(Fail(status))

    def hang(self, seconds: float | None = None) -> None:
        """Hang every request (until `release()` when seconds is None)."""
        self._release.clear()
        self.set_default(Hang(seconds))

    def release(self) -> None:
        """Let hanging requests finish (they then answer with the default text)."""
        self._release.set()

    def reset(self) -> None:
        """Forget requests and scripts; release hanging requests."""
        self._release.set()
        with self._lock:
            self._queue.clear()
            self._default = Reply(default_text)
            self.requests.clear()
        self._release = threading.Event()

    def requests_for(self, provider: str) -> list[RecordedRequest]:
        """Recorded requests of one provider."""
        with self._lock:
            return [r for r in self.requests if r.provider == provider]

    def _next_action(self, req: RecordedRequest) -> Action:
        with self._lock:
            self.requests.append(req)
            return self._queue.pop(0) if self._queue else self._default

    # --- HTTP ------------------------------------------------------------------------

    async def _handle(self, request: Request, provider: str) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode(errors="replace")
        req = RecordedRequest(provider, request.url.path, dict(request.headers), body)
        action = self._next_action(req)
        if isinstance(action, Hang):
            release = self._release
            deadline = None if action.seconds is None else time.monotonic() + action.seconds
            # threading.Event (set from the test thread): poll it rather than block the loop.
            while not release.is_set() and (  # noqa: ASYNC110
                deadline is None or time.monotonic() < deadline
            ):
                await asyncio.sleep(0.02)
            action = action.then or Reply(default_text)
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        if isinstance(action, Fail):
            return self._error(provider, action)
        if isinstance(action, Malformed):
            if action.kind == "json":
                return Response(b'{"id": "msg_1", "content": [', media_type="application/json")
            return JSONResponse({"id": "x", "unexpected": True})
        if isinstance(action, Empty):
            text: str | None = "" if action.blank else None
            return self._ok(provider, model, text, "end_turn", req)
        if isinstance(action, ToolUse):
            if action.delay:
                await asyncio.sleep(action.delay)
            data = action.input(req) if callable(action.input) else action.input
            return self._tool(provider, model, req, data)
        assert isinstance(action, Reply)
        text = action.text(req) if callable(action.text) else action.text
        return self._ok(provider, model, text, action.stop_reason, req)

    def _ok(
        self, provider: str, model: str, text: str | None, stop: str, req: RecordedRequest
    ) -> Response:
        n = next(self._ids)
        in_tokens = max(1, len(json.dumps(req.json)) // 4)
        out_tokens = len(text or "") // 4
        if provider == "anthropic":
            content = [] if text is None else [{"type": "text", "text": text}]
            return JSONResponse(
                {
                    "id": f"msg_fake{n:06d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": in_tokens,
                        "output_tokens": out_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
                headers={"request-id": f"req_fake{n:06d}"},
            )
        finish = {"end_turn": "stop", "max_tokens": "length"}.get(stop, "stop")
        return JSONResponse(
            {
                "id": f"chatcmpl-fake{n:06d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": in_tokens,
                    "completion_tokens": out_tokens,
                    "total_tokens": in_tokens + out_tokens,
                },
            }
        )

    def _tool(self, provider: str, model: str, req: RecordedRequest, data: Any) -> Response:
        n = next(self._ids)
        name = req.tool_name or "tool"
        in_tokens = max(1, len(json.dumps(req.json)) // 4)
        out_tokens = max(1, len(json.dumps(data)) // 4)
        if provider == "anthropic":
            return JSONResponse(
                {
                    "id": f"msg_fake{n:06d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "stop_reason": "tool_use",
                    "stop_sequence": None,
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"toolu_fake{n:06d}",
                            "name": name,
                            "input": data,
                        }
                    ],
                    "usage": {
                        "input_tokens": in_tokens,
                        "output_tokens": out_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
                headers={"request-id": f"req_fake{n:06d}"},
            )
        return JSONResponse(
            {
                "id": f"chatcmpl-fake{n:06d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "logprobs": None,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "refusal": None,
                            "tool_calls": [
                                {
                                    "id": f"call_{n:06d}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(data)},
                                }
                            ],
                        },
                    }
                ],
                "usage": {
                    "prompt_tokens": in_tokens,
                    "completion_tokens": out_tokens,
                    "total_tokens": in_tokens + out_tokens,
                },
            }
        )

    def _error(self, provider: str, action: Fail) -> Response:
        # retry-after-ms keeps SDK retries fast in tests while still exercising them.
        headers = {"retry-after-ms": "1"}
        etype = _ERROR_TYPES.get(action.status, "api_error")
        if provider == "anthropic":
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": etype, "message": action.message},
            }
        else:
            body = {
                "error": {"message": action.message, "type": etype, "param": None, "code": None}
            }
        return JSONResponse(body, status_code=action.status, headers=headers)

    def _app(self) -> Starlette:
        async def anthropic(request: Request) -> Response:
            return await self._handle(request, "anthropic")

        async def openai(request: Request) -> Response:
            return await self._handle(request, "openai")

        return Starlette(
            routes=[
                Route("/v1/messages", anthropic, methods=["POST"]),
                Route("/v1/chat/completions", openai, methods=["POST"]),
                Route("/chat/completions", openai, methods=["POST"]),
            ]
        )

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        """Bind a free loopback port and serve in a daemon thread."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(), log_level="warning", lifespan="off", access_log=False, loop="asyncio"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-llm", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (releases hanging requests first)."""
        self._release.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


if __name__ == "__main__":  # manual use: python -m tests.fakes.llm_server
    server = FakeLLMServer().start()
    print(f"fake LLM on {server.base_url} (openai: {server.openai_base_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
