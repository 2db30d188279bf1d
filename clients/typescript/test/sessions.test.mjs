// Sessions, messages (idempotent appends), context in both formats, search and recall,
// against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Conflict } from "../dist/index.js";
import { client, collect, recording, uid } from "./helpers.mjs";

test("a session is created, read back, updated, listed and deleted", async () => {
  const loom = client();
  const user = uid("u");
  const s = await loom.createSession({ user_id: user, metadata: { source: "ts" }, config: { l1_max_messages: 4 } });
  assert.equal(s.agent_id, "ts-agent");
  assert.equal(s.user_id, user);
  const read = await loom.getSession(s.id);
  assert.equal(read.id, s.id);
  assert.deepEqual(read.metadata, { source: "ts" });
  assert.equal(read.config.l1_max_messages, 4);
  const updated = await loom.updateSession(s.id, { metadata: { source: "ts", step: 2 } });
  assert.deepEqual(updated.metadata, { source: "ts", step: 2 });
  assert.deepEqual((await loom.getSession(s.id)).metadata, { source: "ts", step: 2 });
  const page = await loom.listSessions({ user_id: user });
  assert.deepEqual(page.items.map((x) => x.id), [s.id]);
  await loom.deleteSession(s.id);
  assert.deepEqual((await loom.listSessions({ user_id: user })).items, []);
});

test("appended messages are stored in order and read back", async () => {
  const loom = client();
  const s = await loom.createSession();
  const a = await loom.appendMessages(s.id, [
    { role: "user", content: "Where is the otter?" },
    { role: "assistant", content: "By the river." },
  ]);
  assert.equal(a.last_seq, 2);
  assert.equal(a.replayed, false);
  assert.deepEqual(a.messages.map((m) => m.seq), [1, 2]);
  const page = await loom.listMessages(s.id);
  assert.deepEqual(
    page.items.map((m) => [m.seq, m.role]),
    [
      [1, "user"],
      [2, "assistant"],
    ],
  );
  assert.match(JSON.stringify(page.items[0].content), /Where is the otter\?/);
  assert.equal(page.next_cursor, null);
});

test("an append with the same Idempotency-Key is replayed, not stored twice", async () => {
  const loom = client();
  const s = await loom.createSession();
  const key = uid("turn");
  const first = await loom.appendMessages(s.id, [{ role: "user", content: "only once" }], { idempotencyKey: key });
  const again = await loom.appendMessages(s.id, [{ role: "user", content: "only once" }], { idempotencyKey: key });
  assert.equal(first.replayed, false);
  assert.equal(again.replayed, true);
  assert.equal(again.last_seq, first.last_seq);
  const stored = await collect(loom.iterMessages(s.id));
  assert.equal(stored.length, 1);
  // the same key with another body is refused
  await assert.rejects(
    loom.appendMessages(s.id, [{ role: "user", content: "something else" }], { idempotencyKey: key }),
    (e) => e instanceof Conflict && e.status === 409 && typeof e.code === "string",
  );
  assert.equal((await collect(loom.iterMessages(s.id))).length, 1);
});

test("appends without a key get a fresh generated Idempotency-Key each", async () => {
  const { loom, requests } = recording();
  const s = await loom.createSession();
  await loom.appendMessages(s.id, [{ role: "user", content: "one" }]);
  await loom.appendMessages(s.id, [{ role: "user", content: "one" }]);
  const keys = requests.filter((r) => r.url.endsWith("/messages")).map((r) => r.headers.get("idempotency-key"));
  assert.equal(keys.length, 2);
  assert.ok(keys[0] && keys[1] && keys[0] !== keys[1], `keys: ${keys}`);
  assert.equal((await loom.listMessages(s.id)).items.length, 2); // two distinct appends
});

test("iterMessages follows the cursors over several pages", async () => {
  const loom = client();
  const s = await loom.createSession();
  const texts = Array.from({ length: 7 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `m${i}` }));
  await loom.appendMessages(s.id, texts);
  const first = await loom.listMessages(s.id, { limit: 3 });
  assert.equal(first.items.length, 3);
  assert.ok(first.next_cursor);
  const { loom: rec, requests } = recording();
  const all = await collect(rec.iterMessages(s.id, { limit: 3 }));
  assert.deepEqual(
    all.map((m) => m.seq),
    [1, 2, 3, 4, 5, 6, 7],
  );
  assert.equal(requests.length, 3); // 3 + 3 + 1
  assert.ok(requests[1].url.includes("cursor="));
  const after = await collect(loom.iterMessages(s.id, { after_seq: 5, limit: 1 }));
  assert.deepEqual(
    after.map((m) => m.seq),
    [6, 7],
  );
});

test("iterSessions follows the cursors over several pages", async () => {
  const loom = client();
  const user = uid("pager");
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await loom.createSession({ user_id: user })).id);
  const seen = await collect(loom.iterSessions({ user_id: user, limit: 2 }));
  assert.deepEqual(
    seen.map((x) => x.id),
    ids,
  );
});

test("context in the anthropic and openai formats holds the conversation", async () => {
  const loom = client();
  const s = await loom.createSession();
  await loom.appendMessages(s.id, [
    { role: "user", content: "My otter is called Pebble." },
    { role: "assistant", content: "Noted." },
  ]);
  const a = await loom.context(s.id);
  assert.deepEqual(Object.keys(a).sort(), ["messages", "system", "tools"]);
  assert.equal(a.format, "anthropic");
  assert.equal(a.response.context_id, a.contextId);
  assert.deepEqual(
    a.messages.map((m) => m.role),
    ["user", "assistant"],
  );
  assert.match(JSON.stringify(a.messages[0].content), /Pebble/);
  assert.ok(a.response.total_tokens > 0);
  const spread = { model: "m", ...a };
  assert.equal("response" in spread || "contextId" in spread, false);

  const o = await loom.context(s.id, "openai");
  assert.equal(o.format, "openai");
  assert.ok(!("system" in o));
  assert.deepEqual(o.messages.at(-2), { role: "user", content: "My otter is called Pebble." });
  assert.deepEqual(o.messages.at(-1), { role: "assistant", content: "Noted." });

  const raw = await loom.buildContext(s.id, { format: "raw" });
  assert.equal(raw.format, "raw");
  assert.ok(raw.layers && typeof raw.layers === "object");
  assert.deepEqual(raw.l1_seqs, [1, 2]);
});

test("search finds appended messages; recall places older ones in the context", async () => {
  const loom = client();
  const s = await loom.createSession({ config: { l1_max_messages: 2 } });
  const word = `zebrafish${Math.floor(Math.random() * 1e6)}`;
  const turns = [`The ${word} is named Pebble.`, "ok", "What about the weather?", "sunny", "Tell me a joke", "no"];
  for (const [i, content] of turns.entries()) {
    await loom.appendMessages(s.id, [{ role: i % 2 ? "assistant" : "user", content }]);
  }
  const inSession = await loom.searchSession(s.id, { query: word, ranking: "message" });
  assert.equal(inSession.results[0].seq, 1);
  assert.match(JSON.stringify(inSession.results[0].message), /Pebble/);
  const global = await loom.search({ query: word, rerank: false });
  assert.equal(global.results[0].session_id, s.id);
  assert.equal(global.results[0].seq, 1);

  const ctx = await loom.buildContext(s.id, { recall: { enabled: true, query: `${word} name` } });
  assert.equal(ctx.recall.query, `${word} name`);
  assert.equal(ctx.recall.hits[0].seq, 1);
  assert.deepEqual(ctx.l1_seqs, [5, 6]);

  // the built-in recall tool, as a model would call it
  const tools = await loom.listTools(s.id, { format: "anthropic" });
  assert.ok(tools.tools.length > 0);
  const results = await loom.executeToolCalls(s.id, [
    { type: "text", text: "let me look" },
    { type: "tool_use", id: "toolu_1", name: "search_conversation", input: { query: word } },
  ]);
  assert.equal(results.length, 1);
  assert.equal(results[0].type, "tool_result");
  assert.equal(results[0].tool_use_id, "toolu_1");
  assert.match(JSON.stringify(results[0].content), /Pebble/);
});
