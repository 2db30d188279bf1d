// Memory items and facts: create / read / query pages, PATCH with If-Match (stale: 409),
// history, `as_of`, promotion and clearing, against the live server.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { Conflict, NotFound, PreconditionRequired } from "../dist/index.js";
import { KEY, URL, client, collect, recording, uid } from "./helpers.mjs";

test("an item is corrected with If-Match; a stale version is 409 version_conflict", async () => {
  const loom = client();
  const project = randomUUID();
  const item = await loom.createMemoryItem({
    scope: `project/${project}`,
    kind: "fact",
    text: "Pebble lives in Oslo",
    tags: ["otter"],
  });
  assert.equal(item.version, 1);
  const read = await loom.getMemoryItem(item.id);
  assert.equal(read.text, "Pebble lives in Oslo");
  assert.deepEqual(read.tags, ["otter"]);

  const { loom: rec, requests } = recording();
  const fixed = await rec.updateMemoryItem(item.id, read.version, { text: "Pebble lives in Bergen", reason: "moved" });
  assert.equal(requests[0].method, "PATCH");
  assert.equal(requests[0].headers.get("if-match"), '"1"');
  assert.equal(fixed.version, 2);
  assert.equal(fixed.text, "Pebble lives in Bergen");
  assert.equal((await loom.getMemoryItem(item.id)).text, "Pebble lives in Bergen");

  // the same correction again, from the stale version 1: refused, nothing changes
  const stale = await loom.updateMemoryItem(item.id, 1, { text: "Pebble lives in Tromsø" }).catch((e) => e);
  assert.ok(stale instanceof Conflict, String(stale));
  assert.equal(stale.status, 409);
  assert.equal(stale.code, "version_conflict");
  assert.equal(stale.details.current_version, 2);
  const still = await loom.getMemoryItem(item.id);
  assert.equal(still.text, "Pebble lives in Bergen");
  assert.equal(still.version, 2);
  // an ETag string works as well as a version number
  assert.equal((await loom.updateMemoryItem(item.id, '"2"', { importance: 0.9 })).version, 3);

  // without If-Match at all (a raw PATCH) the server asks for it: 428
  const raw = await fetch(`${URL}/v1/memory-items/${item.id}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${KEY}`, "x-agent-id": "ts-agent", "content-type": "application/json" },
    body: JSON.stringify({ text: "x" }),
  });
  assert.equal(raw.status, 428);
  const { errorFromResponse } = await import("../dist/index.js");
  const typed = errorFromResponse(raw.status, raw.statusText, raw.headers, await raw.text());
  assert.ok(typed instanceof PreconditionRequired);
  assert.equal(typed.code, "if_match_required");

  const history = await loom.getMemoryItemHistory(item.id);
  assert.deepEqual(
    history.versions.map((v) => [v.version, v.change]),
    [
      [1, "add"],
      [2, "edit"],
      [3, "edit"],
    ],
  );
  assert.equal(history.versions[1].reason, "moved");
  assert.equal(history.versions[0].text, "Pebble lives in Oslo");

  await loom.deleteMemoryItem(item.id);
  await assert.rejects(loom.getMemoryItem(item.id), NotFound);
});

test("as_of reads the facts true at a time, each as it read then", async () => {
  const loom = client();
  const scope = `project/${randomUUID()}`;
  const pause = () => new Promise((r) => setTimeout(r, 40));
  const item = await loom.createMemoryItem({ scope, kind: "fact", text: "The office is in Oslo" });
  await pause();
  const before = new Date().toISOString(); // Oslo was true then
  await pause();
  const moved = await loom.updateMemoryItem(item.id, item.version, {
    text: "The office is in Bergen",
    valid_from: new Date().toISOString(),
    reason: "moved",
  });
  assert.equal(moved.version, 2);

  const current = await loom.queryMemoryItems({ filters: { scope } });
  assert.deepEqual(
    current.items.map((x) => x.text),
    ["The office is in Bergen"],
  );
  const then = await loom.queryMemoryItems({ filters: { scope } }, { as_of: before });
  assert.deepEqual(
    then.items.map((x) => [x.id, x.text, x.version]),
    [[item.id, "The office is in Oslo", 1]],
  );
  const history = await loom.getMemoryItemHistory(item.id, { as_of: before });
  assert.equal(history.as_of_version.version, 1);
  assert.equal(history.as_of_version.text, "The office is in Oslo");

  // the office closes: no longer true now, still true at `before`
  await pause();
  const closed = await loom.updateMemoryItem(item.id, moved.version, { invalid_at: new Date().toISOString() });
  assert.ok(closed.invalid_at);
  assert.deepEqual((await loom.queryMemoryItems({ filters: { scope } })).items, []);
  assert.deepEqual(
    (await loom.queryMemoryItems({ filters: { scope } }, { as_of: before })).items.map((x) => x.text),
    ["The office is in Oslo"],
  );
  assert.deepEqual(
    (await loom.queryMemoryItems({ filters: { scope } }, { include_invalidated: true })).items.map((x) => x.id),
    [item.id],
  );
});

test("iterMemoryItems follows the cursors; items are promoted and cleared", async () => {
  const loom = client();
  const task = randomUUID();
  const project = randomUUID();
  const made = [];
  for (let i = 0; i < 5; i++) {
    made.push(await loom.createMemoryItem({ scope: `task/${task}`, kind: "note", text: `note ${i}`, importance: i / 10 }));
  }
  const { loom: rec, requests } = recording();
  const seen = await collect(rec.iterMemoryItems({ filters: { scope: `task/${task}` }, order_by: "-importance", limit: 2 }));
  assert.deepEqual(
    seen.map((x) => x.text),
    ["note 0", "note 1", "note 2", "note 3", "note 4"],
  );
  assert.equal(requests.length, 3);

  const promoted = await loom.promoteMemoryItem(made[0].id, { project_id: project });
  assert.equal(promoted.scope, `project/${project}`);
  const cleared = await loom.clearMemoryItems({ scope: `task/${task}` });
  assert.equal(cleared.removed, 4);
  assert.deepEqual((await loom.queryMemoryItems({ filters: { scope: `task/${task}` } })).items, []);
  assert.equal((await loom.getMemoryItem(made[0].id)).scope, `project/${project}`);
  const pkg = await loom.createContextPackage({ budget_tokens: 500, project_id: project });
  assert.match(JSON.stringify(pkg), /note 0/);
});

test("fact extraction is refused with a clear code while a session's facts are off", async () => {
  const loom = client();
  const s = await loom.createSession();
  const err = await loom.extractFacts(s.id).catch((e) => e);
  assert.ok(err instanceof Conflict, String(err));
  assert.equal(err.code, "facts_disabled");
  const status = await loom.getFactExtraction(s.id);
  assert.equal(typeof status, "object");
  assert.ok(uid());
});
