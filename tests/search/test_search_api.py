"""Swap search through HTTP: stemming, isolation, scopes, odd queries (no LLM configured)."""

import uuid

from tests.search.support import (
    append,
    compressed_session,
    over_budget_session,
    search,
    seqs_of,
)
from tests.support.api import new_session


async def test_stemming_finds_other_word_forms(client):
    sid = await new_session(client)
    await append(
        client,
        sid,
        [
            "The weather is lovely today.",
            "We spent the afternoon on database optimization and index tuning.",
            "Bake the bread for forty minutes.",
            "Optimizers in deep learning are a different topic.",
        ],
    )
    result = await search(client, sid, "optimizing databases")
    assert seqs_of(result)[0] == 2
    assert result["reranked"] is False
    assert set(result["query_lexemes"]) == {"optim", "databas"}
    hit = result["results"][0]
    assert hit["message"]["content"].startswith("We spent the afternoon")
    assert hit["bm25_score"] > 0 and hit["rerank_score"] is None
    assert hit["session_id"] == sid


async def test_results_are_ordered_by_bm25_and_limited(client):
    sid = await new_session(client)
    texts = [f"filler message number {i} about nothing" for i in range(30)]
    texts[5] = "kafka kafka kafka consumer lag"
    texts[17] = "kafka consumer lag"
    texts[22] = "a long message mentioning kafka once among many other words here and there"
    await append(client, sid, texts)
    result = await search(client, sid, "kafka", limit=2)
    # the window leans back: the turns just after the kafka-heavy one share its words
    assert seqs_of(result)[0] == 6 and len(seqs_of(result)) == 2
    plain = await search(client, sid, "kafka", limit=2, ranking="message")
    assert seqs_of(plain) == [6, 18]
    scores = [r["bm25_score"] for r in result["results"]]
    assert scores == sorted(scores, reverse=True)
    # Three messages match; each brings its neighbours within two turns as candidates.
    assert result["candidates"] == 15


async def test_session_isolation(client):
    a = await new_session(client)
    b = await new_session(client)
    await append(client, a, ["postgres replication lag in session A"])
    await append(client, b, ["postgres replication lag in session B"])
    result = await search(client, a, "replication")
    assert [r["session_id"] for r in result["results"]] == [a]


async def test_tenant_isolation(client, tenant, admin_client, app):
    mine = await new_session(client)
    await append(client, mine, ["the zeppelin launch checklist"])
    other_tenant = await admin_client.post(
        "/v1/tenants", json={"name": f"other-{uuid.uuid4().hex[:8]}"}
    )
    tid = other_tenant.json()["id"]
    key = await admin_client.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
    other = tenant.client_for(key.json()["secret"], {"X-Agent-Id": "agent-1"})
    theirs = await new_session(other)
    await append(other, theirs, ["their zeppelin launch checklist"])

    # The other tenant's session id is invisible, not searchable.
    resp = await client.post(f"/v1/sessions/{theirs}/search", json={"query": "zeppelin"})
    assert resp.status_code == 404
    # Tenant-wide search sees only this tenant's messages.
    resp = await client.post("/v1/search", json={"query": "zeppelin", "scope": "tenant"})
    assert resp.status_code == 200
    assert [r["session_id"] for r in resp.json()["results"]] == [mine]


async def test_agent_scope_spans_that_agents_sessions_only(client, tenant):
    a1 = [await new_session(client, "agent-1"), await new_session(client, "agent-1")]
    a2 = await new_session(client, "agent-2")
    for sid in a1 + [a2]:
        await append(client, sid, [f"notes on the quarterly invoice run for {sid}"])

    resp = await client.post("/v1/search", json={"query": "invoice"})  # X-Agent-Id agent-1
    assert resp.status_code == 200
    assert sorted(r["session_id"] for r in resp.json()["results"]) == sorted(a1)

    resp = await client.post("/v1/search", json={"query": "invoice", "agent_id": "agent-2"})
    assert [r["session_id"] for r in resp.json()["results"]] == [a2]

    resp = await client.post("/v1/search", json={"query": "invoice", "scope": "tenant"})
    assert sorted(r["session_id"] for r in resp.json()["results"]) == sorted(a1 + [a2])

    agent_key = await tenant.new_client(role="agent", agent_id="agent-1")
    resp = await agent_key.post("/v1/search", json={"query": "invoice"})
    assert sorted(r["session_id"] for r in resp.json()["results"]) == sorted(a1)
    resp = await agent_key.post("/v1/search", json={"query": "invoice", "agent_id": "agent-2"})
    assert resp.status_code == 403
    resp = await agent_key.post("/v1/search", json={"query": "invoice", "scope": "tenant"})
    assert resp.status_code == 403
    # An agent key cannot search another agent's session directly either.
    resp = await agent_key.post(f"/v1/sessions/{a2}/search", json={"query": "invoice"})
    assert resp.status_code == 404


async def test_service_key_without_agent_needs_one_for_agent_scope(tenant):
    service = tenant.client_for(tenant.service_key)
    resp = await service.post("/v1/search", json={"query": "anything"})
    assert resp.status_code == 400


async def test_empty_stop_word_and_punctuation_queries_return_empty(client):
    sid = await new_session(client)
    await append(client, sid, ["the database is slow", "and so it goes"])
    for query in [
        "",
        "   ",
        "the and of to",
        "!!! ??? ...",
        "'\"&|!():*<->\\",
        "\x00\x01",
        "🙂🙃",
        "-- ; DROP TABLE messages; --",
    ]:
        result = await search(client, sid, query)
        assert result["results"] == [], query
        assert result["reranked"] is False


async def test_operators_and_quotes_are_plain_words(client):
    sid = await new_session(client)
    await append(client, sid, ["the database is slow", "it's O'Reilly's book on C++"])
    for query in [
        "database & !slow",
        "'database'",
        "(database | :*slow)",
        '"database"',
        "database <-> slow",
        "o'reilly's",
    ]:
        result = await search(client, sid, query)
        assert result["results"], query


async def test_very_long_and_unicode_queries(client):
    sid = await new_session(client)
    await append(client, sid, ["Le café est naïve 日本語 テスト", "database " * 50])
    long_query = ("database " * 2000)[:10_000]
    # The matching message first, then its neighbour (the conversation window).
    assert seqs_of(await search(client, sid, long_query)) == [2, 1]
    assert seqs_of(await search(client, sid, "café")) == [1, 2]
    resp = await client.post(f"/v1/sessions/{sid}/search", json={"query": "x" * 10_001})
    assert resp.status_code == 422


async def test_limit_bounds(client):
    sid = await new_session(client)
    for limit in (0, 21):
        resp = await client.post(f"/v1/sessions/{sid}/search", json={"query": "q", "limit": limit})
        assert resp.status_code == 422


async def test_simple_text_search_config_does_not_stem(admin_client, tenant):
    resp = await admin_client.post(
        "/v1/tenants",
        json={"name": f"simple-{uuid.uuid4().hex[:8]}", "text_search_config": "simple"},
    )
    assert resp.status_code == 201, resp.text
    tid = resp.json()["id"]
    key = await admin_client.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
    c = tenant.client_for(key.json()["secret"], {"X-Agent-Id": "agent-1"})
    sid = await new_session(c)
    await append(c, sid, ["database optimization", "die Datenbank ist langsam"])
    assert seqs_of(await search(c, sid, "optimizing")) == []
    assert seqs_of(await search(c, sid, "Datenbank")) == [2, 1]
    # No stop words in `simple`: "the" is a word.
    assert (await search(c, sid, "the"))["query_lexemes"] == ["the"]


async def test_unknown_session_is_404(client):
    resp = await client.post(f"/v1/sessions/{uuid.uuid4()}/search", json={"query": "x"})
    assert resp.status_code == 404


async def test_promote_from_search_respects_budget(client):
    sid = await over_budget_session(client)
    resp = await client.post(
        f"/v1/sessions/{sid}/search", json={"query": "zebra", "promote": True, "rerank": False}
    )
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"]["code"] == "over_budget"
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == []
    # Within budget: the swap results are promoted (L1 ones are in the context already).
    sid, mem = await compressed_session(client)
    result = await search(client, sid, "message 3 lighthouse", limit=3, promote=True)
    assert seqs_of(result)[0] == 4
    in_swap = sorted(s for s in seqs_of(result) if s < mem["l1_start_seq"])
    assert 4 in in_swap and result["promoted_seqs"] == in_swap
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == in_swap


async def test_results_carry_the_whole_message(client):
    sid = await new_session(client)
    resp = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "the marmalade recipe"}],
                    "metadata": {"source": "import"},
                }
            ]
        },
    )
    assert resp.status_code == 201, resp.text
    stored = resp.json()["messages"][0]
    result = await search(client, sid, "marmalade")
    message = result["results"][0]["message"]
    assert message == stored


async def test_after_and_before_bound_the_results_created_at(client):
    sid = await new_session(client)
    times = [
        "2023-01-10T10:00:00Z",
        "2023-03-05T10:00:00Z",
        "2023-05-08T13:56:00+02:00",
        "2023-07-01T09:00:00Z",
    ]
    resp = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"the hiking trip {i}",
                    "created_at": t,
                }
                for i, t in enumerate(times)
            ]
        },
    )
    assert resp.status_code == 201, resp.text
    everything = await search(client, sid, "hiking trip")
    assert sorted(seqs_of(everything)) == [1, 2, 3, 4]
    assert everything["results"][0]["message"]["created_at"] in {
        "2023-07-01T09:00:00Z",
        "2023-01-10T10:00:00Z",
        "2023-03-05T10:00:00Z",
        "2023-05-08T11:56:00Z",
    }
    # after is inclusive, before exclusive; offsets are compared as instants.
    spring = await search(
        client, sid, "hiking trip", after="2023-03-05T10:00:00Z", before="2023-05-08T11:56:00Z"
    )
    assert seqs_of(spring) == [2]
    later = await search(client, sid, "hiking trip", after="2023-05-08T13:00:00+02:00")
    assert sorted(seqs_of(later)) == [3, 4]
    # Naive times are refused like everywhere else.
    resp = await client.post(
        f"/v1/sessions/{sid}/search", json={"query": "hiking", "after": "2023-05-08T13:00:00"}
    )
    assert resp.status_code == 422
    # Agent scope too.
    resp = await client.post(
        "/v1/search",
        json={"query": "hiking trip", "rerank": False, "before": "2023-02-01T00:00:00Z"},
    )
    assert resp.status_code == 200 and seqs_of(resp.json()) == [1]
