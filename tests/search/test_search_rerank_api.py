"""LLM rerank through HTTP against the fake Anthropic server."""

import json
import re

import httpx
from pydantic import SecretStr

from app.main import create_app
from tests.fakes.llm_server import Fail, Malformed, Reply
from tests.search.support import append, seqs_of
from tests.support.api import new_session

LINE = re.compile(r"^\[(\d+)\] (\w+): (.*)$", re.MULTILINE)


def candidates(req) -> list[tuple[int, str]]:
    return [(int(i), json.loads(text)) for i, _, text in LINE.findall(req.text)]


def prefer(word: str):
    """A fake LLM that scores 9 the candidates containing `word`, 1 the others."""

    def answer(req) -> str:
        scores = [{"index": i, "score": 9 if word in text else 1} for i, text in candidates(req)]
        return "Here are the scores:\n```json\n" + json.dumps(scores) + "\n```"

    return answer


async def corpus(client) -> str:
    sid = await new_session(client)
    await append(
        client,
        sid,
        [
            "deploy deploy deploy the service with helm",  # 1: best BM25
            "deploy the canary first",  # 2
            "we deploy on fridays, banana bread for everyone",  # 3: what the LLM prefers
            "unrelated chatter about lunch",  # 4
        ],
    )
    return sid


async def rsearch(client, sid, query, **kw):
    resp = await client.post(f"/v1/sessions/{sid}/search", json={"query": query, **kw})
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_rerank_order_follows_the_llm(llm_client, fake_llm):
    sid = await corpus(llm_client)
    bm25 = await rsearch(llm_client, sid, "deploy", rerank=False)
    assert seqs_of(bm25)[0] == 1
    fake_llm.respond_with(prefer("banana"))
    result = await rsearch(llm_client, sid, "deploy")
    assert result["reranked"] is True
    # LLM score first, BM25 breaks the tie of 1 and 2; 4 (a neighbour, no query word) too
    assert seqs_of(result) == [3, 1, 2, 4]
    assert [r["rerank_score"] for r in result["results"]] == [9.0, 1.0, 1.0, 1.0]
    assert "banana bread" in result["results"][0]["message"]["content"]
    assert result["results"][1]["message"]["content"].startswith("deploy deploy deploy")
    assert len(fake_llm.requests) == 1
    req = fake_llm.requests[0]
    assert "deploy" in req.text and len(candidates(req)) == 4


async def test_previews_are_capped_and_at_most_50_candidates(llm_client, fake_llm):
    sid = await new_session(llm_client)
    await append(llm_client, sid, [f"needle {i} " + "hay " * 300 for i in range(60)])
    fake_llm.respond_with(prefer("needle"))
    result = await rsearch(llm_client, sid, "needle", limit=20)
    assert result["reranked"] is True and len(result["results"]) == 20
    assert result["candidates"] == 50
    cands = candidates(fake_llm.requests[0])
    assert len(cands) == 50
    assert all(len(text) <= 200 for _, text in cands)


async def test_rerank_is_cached_by_query_and_candidates(llm_client, fake_llm):
    sid = await corpus(llm_client)
    fake_llm.respond_with(prefer("banana"))
    first = await rsearch(llm_client, sid, "deploy")
    second = await rsearch(llm_client, sid, "deploy")
    assert seqs_of(first) == seqs_of(second) and second["reranked"] is True
    assert len(fake_llm.requests) == 1
    # A new candidate changes the set: the LLM is asked again.
    await append(llm_client, sid, ["deploy again"])
    await rsearch(llm_client, sid, "deploy")
    assert len(fake_llm.requests) == 2


async def test_malformed_output_falls_back_to_bm25(llm_client, fake_llm):
    sid = await corpus(llm_client)
    bm25 = seqs_of(await rsearch(llm_client, sid, "deploy", rerank=False))
    for answer in [
        Reply("I think message 2 is best."),
        Reply('[{"index": 99, "score": 3}]'),
        Reply('```json\n[{"index": "x"}]\n```'),
        Malformed("json"),
        Malformed("shape"),
    ]:
        fake_llm.reset()
        fake_llm.script(answer)
        result = await rsearch(llm_client, sid, f"deploy {answer!r}"[:60])
        assert result["reranked"] is False, answer
        assert seqs_of(result)[: len(bm25)] == bm25
        assert all(r["rerank_score"] is None for r in result["results"])


async def test_llm_errors_fall_back_to_bm25(llm_client, fake_llm):
    sid = await corpus(llm_client)
    bm25 = seqs_of(await rsearch(llm_client, sid, "deploy", rerank=False))
    for status in (500, 529, 429, 401):
        fake_llm.reset()
        fake_llm.script(Fail(status))
        result = await rsearch(llm_client, sid, f"deploy service {status}")
        assert result["reranked"] is False
        assert seqs_of(result) == bm25


async def test_llm_timeout_falls_back_to_bm25(llm_client, fake_llm):
    sid = await corpus(llm_client)
    fake_llm.hang()
    result = await rsearch(llm_client, sid, "deploy helm")
    assert result["reranked"] is False and seqs_of(result)[0] == 1


async def test_no_llm_configured_means_bm25_only(client):
    sid = await corpus(client)
    result = await rsearch(client, sid, "deploy")
    assert result["reranked"] is False and seqs_of(result)[0] == 1


async def test_tenant_search_is_reranked_too(llm_client, fake_llm):
    await corpus(llm_client)
    fake_llm.respond_with(prefer("banana"))
    resp = await llm_client.post("/v1/search", json={"query": "deploy", "scope": "tenant"})
    assert resp.status_code == 200
    data = resp.json()
    assert data["reranked"] is True and data["results"][0]["seq"] == 3


async def test_redis_down_skips_the_cache_but_still_reranks(settings, fake_llm, tenant):
    dead = settings.model_copy(
        update={
            "redis_url": "redis://127.0.0.1:9/0",  # nothing listens on the discard port
            "anthropic_api_key": SecretStr("sk-test-fake"),
            "anthropic_base_url": fake_llm.base_url,
            "llm_max_retries": 0,
            "search_rerank_timeout_seconds": 3.0,
        }
    )
    application = create_app(dead)
    async with application.router.lifespan_context(application):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application),
            base_url="http://test",
            headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"},
        ) as c:
            sid = await corpus(c)
            fake_llm.respond_with(prefer("banana"))
            for _ in range(2):
                result = await rsearch(c, sid, "deploy")
                assert result["reranked"] is True and seqs_of(result)[0] == 3
            assert len(fake_llm.requests) == 2  # no cache: asked twice
