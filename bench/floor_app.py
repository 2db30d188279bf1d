"""The floor: the same HTTP stack (FastAPI on uvicorn) answering from the raw queries an
operation needs, with no auth, validation or domain logic. Ratios in the report are to it."""

import json
import os
import uuid
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import Response

DSN = os.environ["BENCH_FLOOR_DSN"]


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.pool = await asyncpg.create_pool(DSN, min_size=4, max_size=20)
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


@app.get("/floor/sessions/{session_id}")
async def read_session(session_id: uuid.UUID, request: Request) -> Response:
    """A session row and its last 10 messages (the spec's reference floor)."""
    async with request.app.state.pool.acquire() as conn:
        s = await conn.fetchrow("select id, agent_id, config, last_seq from sessions "
                                "where id = $1", session_id)
        msgs = await conn.fetch("select seq, role, content, token_count from messages "
                                "where session_id = $1 order by seq desc limit 10", session_id)
    body = {"id": str(s["id"]), "agent_id": s["agent_id"], "config": s["config"],
            "messages": [dict(m) for m in reversed(msgs)]}
    return Response(json.dumps(body, default=str), media_type="application/json")


@app.post("/floor/sessions/{session_id}/messages")
async def append(session_id: uuid.UUID, request: Request) -> Response:
    """Raw append: bump the seq under the row lock, insert the messages."""
    payload = await request.json()
    msgs = payload["messages"]
    async with request.app.state.pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            "update sessions set last_seq = last_seq + $2 where id = $1 "
            "returning last_seq, tenant_id", session_id, len(msgs))
        first = row["last_seq"] - len(msgs) + 1
        await conn.executemany(
            "insert into messages (session_id, seq, tenant_id, role, content, text, "
            "token_count, search_vector) values ($1, $2, $3, $4, $5::jsonb, $6, $7, "
            "to_tsvector('english', $6))",
            [(session_id, first + i, row["tenant_id"], m["role"], json.dumps(m["content"]),
              m["content"], 10) for i, m in enumerate(msgs)])
    return Response(json.dumps({"last_seq": row["last_seq"]}), media_type="application/json",
                    status_code=201)
