// Shared memory: JSON and raw entries, compare-and-set (409 / 412), conditional reads, key
// pages, and the SSE watch, against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Conflict, LoomError, NotFound, PreconditionFailed, isBlob } from "../dist/index.js";
import { client, collect, recording, uid } from "./helpers.mjs";

test("a JSON entry is written, read back, compared-and-set and deleted", async () => {
  const loom = client();
  const key = `${uid("plan")}/current`;
  const created = await loom.putSharedMemory("global", key, { step: 1 }, { metadata: { by: "ts" } });
  assert.equal(created.created, true);
  assert.equal(created.key, key);
  const read = await loom.getSharedMemory("global", key);
  assert.ok(!isBlob(read));
  assert.deepEqual(read.value, { step: 1 });
  assert.deepEqual(read.metadata, { by: "ts" });
  assert.equal(read.version, created.version);
  assert.equal(read.writer_agent_id, "ts-agent");
  // the common case in one call, typed as a JSON entry
  const json = await loom.getSharedMemoryJson("global", key);
  assert.deepEqual(json.value, { step: 1 });
  assert.equal(json.version, created.version);

  const next = await loom.putSharedMemory("global", key, { step: 2 }, {}, { ifMatch: created.version });
  assert.equal(next.created, false);
  assert.ok(next.version > created.version);

  // a stale version: 409 version_conflict, and the entry keeps the newer value
  const stale = await loom.putSharedMemory("global", key, { step: 99 }, {}, { ifMatch: created.version }).catch((e) => e);
  assert.ok(stale instanceof Conflict, String(stale));
  assert.equal(stale.status, 409);
  assert.equal(stale.code, "version_conflict");
  assert.deepEqual((await loom.getSharedMemory("global", key)).value, { step: 2 });

  // create-only on an existing key, and If-Match on a missing one: 412
  const exists = await loom.putSharedMemory("global", key, { step: 0 }, {}, { ifNoneMatch: "*" }).catch((e) => e);
  assert.ok(exists instanceof PreconditionFailed, String(exists));
  assert.equal(exists.status, 412);
  const missing = await loom.putSharedMemory("global", `${key}-nope`, 1, {}, { ifMatch: 1 }).catch((e) => e);
  assert.ok(missing instanceof PreconditionFailed, String(missing));
  assert.equal(missing.status, 412);

  // a conditional read: null while unchanged (304), the entry once it moved on
  assert.equal(await loom.getSharedMemoryIfChanged("global", key, next.etag), null);
  const moved = await loom.getSharedMemoryIfChanged("global", key, created.version);
  assert.deepEqual(moved.value, { step: 2 });

  await assert.rejects(loom.deleteSharedMemory("global", key, {}, { ifMatch: created.version }), Conflict);
  await loom.deleteSharedMemory("global", key, {}, { ifMatch: next.version });
  const gone = await loom.getSharedMemory("global", key).catch((e) => e);
  assert.ok(gone instanceof NotFound);
  assert.equal(gone.code, "entry_not_found");
});

test("raw bytes and text are stored as they are", async () => {
  const loom = client();
  const key = uid("blob");
  const bytes = new Uint8Array([0, 1, 2, 250, 255]);
  await loom.putSharedMemoryBytes("global", key, bytes, { metadata: { kind: "bin" } });
  const blob = await loom.getSharedMemory("global", key);
  assert.ok(isBlob(blob));
  assert.deepEqual([...blob.content], [0, 1, 2, 250, 255]);
  assert.equal(blob.contentType, "application/octet-stream");
  assert.ok(blob.version >= 1);
  assert.ok(blob.etag);
  // getSharedMemoryJson refuses a raw entry, naming it and what reads it
  const notJson = await loom.getSharedMemoryJson("global", key).catch((e) => e);
  assert.ok(notJson instanceof LoomError, String(notJson));
  assert.equal(notJson.code, "not_json");
  assert.match(notJson.message, /holds application\/octet-stream, not JSON: read it with getSharedMemory/);
  await assert.rejects(loom.getSharedMemoryJson("global", `${key}-none`), NotFound);
  const written = await loom.putSharedMemoryBytes("global", `${key}-t`, "héllo otters");
  const text = await loom.getSharedMemory("global", `${key}-t`);
  assert.equal(new TextDecoder().decode(text.content), "héllo otters");
  assert.match(text.contentType, /^text\/plain/);
  const ref = await loom.getSharedMemoryRef("global", `${key}-t`);
  assert.equal(ref.id, written.ref_id);
  assert.equal(ref.size_bytes, new TextEncoder().encode("héllo otters").length);
  const data = await loom.getRef(ref.id);
  assert.equal(new TextDecoder().decode(data.content), "héllo otters");
  assert.equal((await loom.getRefMeta(ref.id)).checksum, written.checksum);
});

test("scoped namespaces and key pages follow the cursors", async () => {
  const { loom, requests } = recording();
  const scope = uid("swarm");
  const keys = ["tasks/a", "tasks/b", "tasks/c", "tasks/d", "tasks/e", "other/x"];
  for (const k of keys) await loom.putSharedMemory("swarm", k, { k }, { scope_id: scope });
  const page = await loom.listSharedMemoryKeys("swarm", { scope_id: scope, prefix: "tasks/", limit: 2 });
  assert.equal(page.items.length, 2);
  assert.ok(page.next_cursor);
  requests.length = 0;
  const all = await collect(loom.iterSharedMemoryKeys("swarm", { scope_id: scope, prefix: "tasks/", limit: 2 }));
  assert.deepEqual(
    all.map((x) => x.key),
    ["tasks/a", "tasks/b", "tasks/c", "tasks/d", "tasks/e"],
  );
  assert.equal(requests.length, 3);
  const stats = await loom.sharedMemoryStats();
  assert.ok(JSON.stringify(stats).includes("swarm"));
});

test("the watch streams a change made after subscribing, then closes", async () => {
  const loom = client();
  const scope = uid("w");
  await loom.putSharedMemory("workflow", "jobs/old", { n: 0 }, { scope_id: scope });
  const watch = loom.watchSharedMemory("workflow", { scope_id: scope, prefix: "jobs/", include_initial: true });
  const events = watch[Symbol.asyncIterator]();
  const ready = await events.next();
  assert.equal(ready.value.event, "ready");
  const initial = await events.next();
  assert.equal(initial.value.event, "put");
  assert.equal(initial.value.key, "jobs/old");
  assert.equal(initial.value.initial, true);

  // changes after the subscription: a put (outside the prefix: not sent) and a delete
  await loom.putSharedMemory("workflow", "elsewhere", { n: 9 }, { scope_id: scope });
  const written = await loom.putSharedMemory("workflow", "jobs/new", { n: 1 }, { scope_id: scope });
  await loom.deleteSharedMemory("workflow", "jobs/old", { scope_id: scope });
  const put = (await events.next()).value;
  assert.equal(put.event, "put");
  assert.equal(put.key, "jobs/new");
  assert.equal(put.initial, false);
  assert.equal(put.version, written.version);
  assert.equal(put.id, String(written.version));
  assert.equal(put.etag, written.etag);
  assert.deepEqual(put.value, { n: 1 });
  assert.equal(put.writer_agent_id, "ts-agent");
  const del = (await events.next()).value;
  assert.equal(del.event, "delete");
  assert.equal(del.key, "jobs/old");
  await watch.close();
  assert.deepEqual(await events.next(), { value: undefined, done: true });
});

test("a watch ends on break and on abort; a refused watch throws the typed error", async () => {
  const loom = client();
  const scope = uid("w");
  let seen = 0;
  for await (const event of loom.watchSharedMemory("workflow", { scope_id: scope, heartbeat_seconds: 0.2 })) {
    seen++;
    if (event.event === "heartbeat") break;
  }
  assert.equal(seen, 2); // ready, heartbeat

  const controller = new AbortController();
  const watch = loom.watchSharedMemory("workflow", { scope_id: scope }, { signal: controller.signal });
  const it = watch[Symbol.asyncIterator]();
  assert.equal((await it.next()).value.event, "ready");
  const pending = it.next();
  controller.abort();
  assert.deepEqual(await pending, { value: undefined, done: true });

  const refused = loom.watchSharedMemory("workflow"); // workflow needs a scope_id
  const err = await refused.open().catch((e) => e);
  assert.equal(err.status, 400);
  assert.equal(err.name, "BadRequest");
});
