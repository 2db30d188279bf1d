"""The transcript of docs/mcp.md ("A session"), from a real server through the MCP SDK's
client: what an agent (agent key `claude`, one session created over REST) sees of the tool
list and of one call of each kind, results without nulls, empty fields and bookkeeping
(timestamps, checksums: `LEFT_OUT`) and cut to a few lines. Printed; --update-docs replaces
the transcript in docs/mcp.md.

    .venv/bin/python scripts/mcp_transcript.py                 # own server, fresh database
    .venv/bin/python scripts/mcp_transcript.py --update-docs

It creates a database on the machine's PostgreSQL (LOOM_TEST_PG, as the tests do), migrates
it, starts the API on a free port (Redis: LOOM_TEST_REDIS; no LLM, so `reranked: false`)
and drops the database at the end.
"""

import argparse
import asyncio
import json
import os
import re
import secrets
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOC = ROOT / "docs" / "mcp.md"
REDIS_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
WIDTH = 92
CUT = 330  # characters of a result shown, then `...`
UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def short(text: str) -> str:
    """UUIDs as their first eight digits and `-...`."""
    return UUID.sub(r"\1-...", text)


# bookkeeping a reader of the transcript does not need (the tool results carry it all)
LEFT_OUT = {
    "created_at",
    "updated_at",
    "valid_from",
    "checksum",
    "stored_bytes",
    "size_bytes",
    "compressed",
    "ref_id",
    "storage_location",
    "content_type",
    "writer_agent_id",
}


def pruned(value: Any) -> Any:
    """`value` without nulls, empty lists and objects, and the LEFT_OUT fields."""
    if isinstance(value, dict):
        out = {k: pruned(v) for k, v in value.items() if k not in LEFT_OUT}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


def wrap(first: str, text: str, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def shown(result: Any) -> list[str]:
    """A tool result as the transcript shows it: `isError: ...` for an error, the JSON cut."""
    block = result.content[0].text
    if result.is_error:
        code_message, _, details = block.partition("\n")
        lines = [f"isError: {short(code_message)}"]
        return lines + ([short(details)] if details.strip() else [])
    text = short(json.dumps(pruned(json.loads(block)), ensure_ascii=False))
    if len(text) > CUT:
        text = text[:CUT].rsplit(", ", 1)[0] + ", ..."
    return wrap("", text, " ")


async def transcript(base: str, key: str, session_id: str, other_session: str) -> list[str]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out: list[str] = []
    async with (
        httpx2.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        out.append(
            f"server: {init.server_info.name} {init.server_info.version}, "
            f"protocol {init.protocol_version}"
        )
        tools = [t.name for t in (await session.list_tools()).tools]
        out += wrap("tools: ", ", ".join(tools), "       ")

        async def call(tool: str, args: dict[str, Any], note: str = "") -> Any:
            out.append("")
            line = f"> {tool} {short(json.dumps(args, ensure_ascii=False))}"
            out.extend(wrap("", line + (f"     ({note})" if note else ""), "    "))
            result = await session.call_tool(tool, args)
            out.extend(shown(result))
            return None if result.is_error else json.loads(result.content[0].text)

        await call(
            "append_messages",
            {
                "session_id": session_id,
                "messages": [
                    {"role": "user", "content": "Let's use PostgreSQL for the billing service."},
                    {
                        "role": "assistant",
                        "content": "Agreed: PostgreSQL for billing, Redis as the cache.",
                    },
                ],
            },
        )
        await call(
            "search_memory", {"query": "which database did we pick for billing?", "limit": 1}
        )
        value = {"tabs": False, "width": 100}
        await call(
            "shared_memory_put",
            {"namespace": "agent", "key": "preferences/editor", "value": value},
        )
        await call(
            "shared_memory_put",
            {
                "namespace": "agent",
                "key": "preferences/editor",
                "value": {"tabs": True},
                "if_version": 0,
            },
        )
        await call("shared_memory_get", {"namespace": "agent", "key": "preferences/editor"})
        await call(
            "knowledge_add_item",
            {
                "scope": "project/billing",
                "kind": "decision",
                "text": "Billing runs on PostgreSQL.",
                "importance": 0.9,
            },
        )
        await call("knowledge_build_package", {"project_id": "billing", "budget_tokens": 200})
        fact = await call(
            "knowledge_add_item",
            {"scope": "agent", "kind": "fact", "text": "The user reviews code in the morning."},
        )
        await call("search_facts", {"query": "when does the user review code?", "scope": "agent"})
        if fact is not None:
            await call(
                "forget_fact", {"id": fact["id"], "reason": "The user now reviews at night."}
            )
        await call("get_context", {"session_id": session_id, "format": "openai"})
        await call(
            "recall_conversation",
            {"session_id": other_session},
            "not a session of this agent",
        )
    return out


def run() -> list[str]:
    import httpx

    from app.core.config import Settings
    from app.launcher.migrate import upgrade
    from tests.console.sample import new_tenant
    from tests.support.databases import fresh_database, url_of
    from tests.support.live import live_api

    with fresh_database("loom_mcp_doc") as name:
        url = url_of(name)
        upgrade(url)
        admin_key = "lm_mcp_doc_" + secrets.token_urlsafe(24)
        settings = Settings(
            DATABASE_URL=url,
            REDIS_URL=REDIS_URL,
            LOOM_ADMIN_KEY=admin_key,
            LOOM_QUEUE_NAME=f"loom:mcp-doc:{uuid.uuid4().hex[:12]}",
        )
        with live_api(settings, LOOM_LLM_PROVIDER="none") as base:
            tenant = new_tenant(base, admin_key)
            key = tenant.agent_key("claude")
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as c:
                sid = c.post("/v1/sessions", json={}).json()["id"]
            with tenant.client("someone-else") as c:
                other = c.post("/v1/sessions", json={}).json()["id"]
            return asyncio.run(transcript(base, key, sid, other))


def replace_in_doc(doc: str, lines: list[str]) -> str:
    """docs/mcp.md with the ```text block under "## A session" replaced by `lines`."""
    start = doc.index("## A session")
    open_ = doc.index("```text\n", start) + len("```text\n")
    close = doc.index("\n```", open_)
    return doc[:open_] + "\n".join(lines) + doc[close:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/mcp.md's")
    args = parser.parse_args(argv)
    lines = run()
    if args.update_docs:
        DOC.write_text(replace_in_doc(DOC.read_text(), lines))
        print(f"wrote the transcript into {DOC.relative_to(ROOT)}")
    else:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
