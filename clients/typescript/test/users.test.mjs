// Users, export / import and erasure with its receipt; recorded contexts (manifests):
// list, read, replay, diff. Against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { LoomClient, NotFound } from "../dist/index.js";
import { URL, admin, client, collect, recording, uid } from "./helpers.mjs";

test("users are listed page by page and read with their counts", async () => {
  const loom = client();
  const users = [uid("pu"), uid("pu"), uid("pu")];
  for (const user of users) {
    const s = await loom.createSession({ user_id: user });
    await loom.appendMessages(s.id, [{ role: "user", content: `hello from ${user}` }]);
  }
  const { loom: rec, requests } = recording();
  const seen = (await collect(rec.iterUsers({ limit: 1 }))).map((u) => u.id);
  for (const user of users) assert.ok(seen.includes(user), `${user} listed`);
  assert.ok(requests.length >= 3); // one page per user at least
  const one = await loom.getUser(users[0]);
  assert.equal(one.session_count, 1);
  assert.equal(one.message_count, 1);
});

test("a user is exported, imported into another tenant, then erased with a receipt", async () => {
  const loom = client();
  const user = uid("cust");
  const s = await loom.createSession({ user_id: user });
  await loom.appendMessages(s.id, [
    { role: "user", content: "my order 55 is late" },
    { role: "assistant", content: "Sorry, checking." },
  ]);
  const hits = await loom.search({ query: "order 55", scope: "user", user_id: user, rerank: false });
  assert.equal(hits.results[0].session_id, s.id);

  const data = await loom.exportUser(user);
  const lines = data.trim().split("\n").map((l) => JSON.parse(l));
  assert.ok(lines.length >= 3);
  assert.match(data, /my order 55 is late/);
  assert.match(await loom.exportSession(s.id), /Sorry, checking\./);
  const again = await loom.importExport(data); // the same ids: nothing new
  assert.equal(Object.values(again.inserted).reduce((a, b) => a + b, 0), 0);
  assert.equal(again.already_present.message, 2);

  // into a fresh tenant (made with the admin key): the session and its messages arrive
  const root = admin();
  const tenant = await root.createTenant({ name: uid("ts-import") });
  const key = await root.createApiKey({ role: "service", tenant_id: tenant.id });
  const other = new LoomClient({ baseUrl: URL, apiKey: key.secret, agentId: "ts-agent" });
  const imported = await other.importExport(new TextEncoder().encode(data));
  assert.equal(imported.inserted.message, 2);
  const copied = await other.listMessages(s.id);
  assert.deepEqual(
    copied.items.map((m) => m.role),
    ["user", "assistant"],
  );
  assert.equal((await other.getUser(user)).session_count, 1);
  assert.match(await root.exportTenant({ tenantId: tenant.id }), /my order 55 is late/);

  const receipt = await loom.eraseUser(user);
  assert.equal(receipt.kind, "user");
  assert.equal(receipt.status, "completed");
  assert.equal(receipt.counts.messages, 2);
  assert.equal(receipt.counts.sessions, 1);
  assert.deepEqual((await loom.getErasure(receipt.erasure_id)).counts, receipt.counts);
  const found = await loom.findErasures({ user_id: user });
  assert.deepEqual(
    found.items.map((e) => e.erasure_id),
    [receipt.erasure_id],
  );
  await assert.rejects(loom.getUser(user), (e) => e instanceof NotFound && e.status === 404);
  await assert.rejects(loom.getSession(s.id), NotFound);
  // the other tenant's copy is its own
  assert.equal((await other.getUser(user)).session_count, 1);
});

test("an agent's private memory is erased with a receipt", async () => {
  const agent = uid("agent");
  const loom = client({ agentId: agent });
  await loom.putSharedMemory("agent", "notes/a", { x: 1 });
  await loom.putSharedMemory("agent", "notes/b", { x: 2 });
  const receipt = await loom.eraseAgentMemory(agent);
  assert.equal(receipt.kind, "agent");
  assert.equal(receipt.counts.shared_memory_entries, 2);
  assert.deepEqual((await loom.listSharedMemoryKeys("agent")).items, []);
});

test("recorded contexts are listed, read, replayed and diffed", async () => {
  const loom = client();
  const s = await loom.createSession({ config: { audit: true } });
  await loom.appendMessages(s.id, [{ role: "user", content: "first question" }]);
  const one = await loom.buildContext(s.id);
  assert.equal(one.recorded, true);
  await loom.appendMessages(s.id, [
    { role: "assistant", content: "first answer" },
    { role: "user", content: "second question" },
  ]);
  const two = await loom.context(s.id, "anthropic");
  assert.equal(two.response.recorded, true);
  const three = await loom.buildContext(s.id, { format: "openai", record: false });
  assert.equal(three.recorded, false);

  const listed = await collect(loom.iterContexts(s.id, { limit: 1 }));
  assert.deepEqual(
    listed.map((c) => c.context_id),
    [two.contextId, one.context_id],
  ); // newest first; the unrecorded build is not there

  const manifest = await loom.getContextManifest(s.id, one.context_id);
  assert.equal(manifest.context_id, one.context_id);
  assert.equal(manifest.session_id, s.id);
  assert.ok(manifest.blocks.length > 0);
  const replay = await loom.replayContext(s.id, one.context_id, { format: "anthropic" });
  assert.equal(replay.sha256, manifest.sha256.anthropic);
  assert.match(JSON.stringify(replay.messages), /first question/);

  const diff = await loom.diffContexts(s.id, one.context_id, two.contextId);
  assert.ok(diff.added.length > 0, JSON.stringify(diff));
  assert.ok(diff.token_delta > 0);
  assert.equal(diff.total_tokens_b, two.response.total_tokens);
  await assert.rejects(loom.getContextManifest(s.id, three.context_id), NotFound);
});
