// The pieces without I/O: the SSE parser, Retry-After, path and ETag helpers, the error
// envelope.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Conflict,
  LoomError,
  SSEParser,
  ServerError,
  errorFromResponse,
  etag,
  keyPath,
  newIdempotencyKey,
  retryAfterSeconds,
  segment,
} from "../dist/index.js";

test("the SSE parser handles any chunking, CRLF, comments, ids and unknown events", () => {
  const stream =
    'event: ready\ndata: {"at":"t0"}\n\n' +
    ": a comment\r\n" +
    'id: 7\r\nevent: put\r\ndata: {"op":"put","namespace":"global","key":"k","version":7}\r\n\r\n' +
    "event: novel\ndata: line one\ndata: line two\n\n" +
    'event: closed\ndata: {"reason":"shutdown"}\n\n';
  for (const size of [1, 2, 5, 13, stream.length]) {
    const parser = new SSEParser();
    const events = [];
    for (let i = 0; i < stream.length; i += size) events.push(...parser.push(stream.slice(i, i + size)));
    assert.deepEqual(events, [
      { event: "ready", at: "t0" },
      { event: "put", op: "put", namespace: "global", key: "k", version: 7, id: "7", initial: false },
      { event: "unknown", name: "novel", data: "line one\nline two" },
      { event: "closed", reason: "shutdown", missed: 0 },
    ], `chunks of ${size}`);
  }
});

test("Retry-After as seconds or an HTTP date", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterSeconds(new Headers({ "retry-after": "2" })), 2);
  assert.equal(retryAfterSeconds(new Headers({ "retry-after": "Thu, 01 Jan 2026 00:00:30 GMT" }), now), 30);
  assert.equal(retryAfterSeconds(new Headers({ "retry-after": "soon" })), undefined);
  assert.equal(retryAfterSeconds(new Headers()), undefined);
});

test("paths, ETags and idempotency keys", () => {
  assert.equal(segment("a/b c"), "a%2Fb%20c");
  assert.equal(keyPath("plans/q3 draft/ü"), "plans/q3%20draft/%C3%BC");
  assert.equal(etag(3), '"3"');
  assert.equal(etag('W/"3"'), 'W/"3"');
  assert.throws(() => etag(1.5), TypeError);
  const a = newIdempotencyKey();
  assert.match(a, /^[0-9a-f-]{32,36}$/);
  assert.notEqual(a, newIdempotencyKey());
});

test("the error envelope becomes the class of its status", () => {
  const body = JSON.stringify({ error: { code: "version_conflict", message: "stale", details: { current_version: 4 } } });
  const e = errorFromResponse(409, "Conflict", new Headers({ "x-request-id": "r1" }), body);
  assert.ok(e instanceof Conflict && e instanceof LoomError && e instanceof Error);
  assert.deepEqual([e.name, e.status, e.code, e.message, e.details, e.requestId], [
    "Conflict",
    409,
    "version_conflict",
    "stale",
    { current_version: 4 },
    "r1",
  ]);
  assert.equal(String(e), "Conflict: 409 version_conflict: stale");
  const plain = errorFromResponse(502, "Bad Gateway", new Headers(), "<html>proxy</html>");
  assert.ok(plain instanceof ServerError);
  assert.equal(plain.code, "http_502");
  assert.equal(plain.message, "<html>proxy</html>");
  const odd = errorFromResponse(418, "", new Headers(), "");
  assert.equal(odd.constructor, LoomError);
  assert.equal(odd.code, "http_418");
});

test("every operation of openapi/openapi.json has a method", async () => {
  const { readFileSync } = await import("node:fs");
  const { LoomClient, OPERATIONS } = await import("../dist/index.js");
  const spec = JSON.parse(readFileSync(new URL("../../../openapi/openapi.json", import.meta.url), "utf8"));
  const ids = Object.values(spec.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
  const missing = ids.filter((id) => !(id in OPERATIONS));
  assert.deepEqual(missing, [], `operations without a method (add one to src/client.ts and OPERATIONS): ${missing}`);
  const gone = Object.keys(OPERATIONS).filter((id) => !ids.includes(id));
  assert.deepEqual(gone, [], `OPERATIONS names operations the API no longer has: ${gone}`);
  for (const methods of Object.values(OPERATIONS)) {
    for (const name of methods) assert.equal(typeof LoomClient.prototype[name], "function", name);
  }
});

test("the library imports nothing from Node (browsers and edge runtimes)", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { fileURLToPath } = await import("node:url");
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
  const files = walk(fileURLToPath(new URL("../dist/", import.meta.url))).filter((f) => f.endsWith(".js"));
  assert.ok(files.length >= 5, String(files));
  for (const file of files) {
    const code = readFileSync(file, "utf8");
    assert.doesNotMatch(code, /from\s+["']node:|require\(|from\s+["'](fs|path|http|https|crypto|os|url|buffer)["']/, String(file));
    assert.doesNotMatch(code, /\bBuffer\.|\bprocess\.env\b/, String(file));
  }
});
