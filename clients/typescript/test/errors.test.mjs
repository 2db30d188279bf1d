// Typed errors from the error envelope, and retries of 503 / 429 honouring Retry-After
// (against a tiny local HTTP server that answers what each test scripts).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import {
  BadRequest,
  LoomClient,
  LoomConnectionError,
  LoomError,
  NotFound,
  RateLimited,
  ServerError,
  Unauthorized,
  Unavailable,
  ValidationError,
} from "../dist/index.js";
import { KEY, URL, client } from "./helpers.mjs";

test("a missing session is the typed NotFound with the server's code", async () => {
  const loom = client();
  const err = await loom.getSession("00000000-0000-4000-8000-000000000000").catch((e) => e);
  assert.ok(err instanceof NotFound);
  assert.ok(err instanceof LoomError);
  assert.equal(err.name, "NotFound");
  assert.equal(err.status, 404);
  assert.equal(err.code, "session_not_found");
  assert.match(err.message, /session/i);
  assert.ok(err.requestId, "the answer's X-Request-Id is kept");
});

test("a bad body is ValidationError with the invalid fields in details", async () => {
  const loom = client();
  const s = await loom.createSession();
  const err = await loom.appendMessages(s.id, [{ role: "wizard", content: "x" }]).catch((e) => e);
  assert.ok(err instanceof ValidationError, String(err));
  assert.equal(err.status, 422);
  assert.equal(err.code, "validation_error");
  assert.ok(Array.isArray(err.details) && err.details.length > 0);
  assert.ok(err.details.some((d) => d.loc.includes("role")), JSON.stringify(err.details));
  assert.equal((await loom.listMessages(s.id)).items.length, 0); // nothing stored
});

test("a bad cursor is BadRequest, a bad key Unauthorized", async () => {
  const err = await client().listSessions({ cursor: "nope.nope" }).catch((e) => e);
  assert.ok(err instanceof BadRequest);
  assert.equal(err.code, "invalid_cursor");
  const denied = await new LoomClient({ baseUrl: URL, apiKey: "lm_not_a_key" }).me().catch((e) => e);
  assert.ok(denied instanceof Unauthorized);
  assert.equal(denied.status, 401);
  assert.equal(denied.code, "unauthorized");
  assert.equal((await client().me()).role, "service");
  assert.ok(KEY);
});

test("a server that is down is LoomConnectionError, not a raw fetch TypeError", async () => {
  const { port, close } = await scripted([]);
  await close(); // nothing listens there any more
  const loom = new LoomClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k", retry: { maxRetries: 1, baseDelayMs: 10 } });
  const err = await loom.getSession("x").catch((e) => e);
  assert.ok(err instanceof LoomConnectionError, String(err));
  assert.equal(err.code, "connection_error");
  assert.equal(err.status, 0);
  assert.match(err.message, /cannot reach Loom/);
});

/** A local HTTP server answering the scripted replies in order (then 500); records requests. */
async function scripted(replies) {
  const requests = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body, at: Date.now() });
      const reply = replies.shift() ?? { status: 500, body: { error: { code: "script_ended", message: "no more replies" } } };
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(reply.status, { "content-type": "application/json", ...(reply.headers ?? {}) });
        res.end(JSON.stringify(reply.body ?? {}));
      }, reply.delayMs ?? 0);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    port,
    requests,
    base: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections?.();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

const unavailable = (after) => ({
  status: 503,
  headers: after === undefined ? {} : { "retry-after": String(after) },
  body: { error: { code: "database_unavailable", message: "The database is unavailable.", details: null } },
});
const limited = (after) => ({
  status: 429,
  headers: { "retry-after": String(after) },
  body: { error: { code: "rate_limited", message: "Rate limit exceeded for this key.", details: null } },
});

test("503 with Retry-After is retried after the wait, then succeeds", async (t) => {
  const srv = await scripted([unavailable(1), { status: 200, body: { id: "s-1", agent_id: "a" } }]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k" });
  const started = Date.now();
  const session = await loom.getSession("s-1");
  assert.equal(session.id, "s-1");
  assert.equal(srv.requests.length, 2);
  const waited = srv.requests[1].at - srv.requests[0].at;
  assert.ok(waited >= 950, `waited ${waited} ms for Retry-After: 1`);
  assert.ok(Date.now() - started < 5000);
  assert.equal(srv.requests[1].headers.authorization, "Bearer k");
});

test("429 is retried; the append is resent with the same Idempotency-Key and body", async (t) => {
  const appended = { messages: [], last_seq: 1, replayed: false };
  const srv = await scripted([limited(0), limited(0), { status: 201, body: appended }]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k" });
  const result = await loom.appendMessages("s-1", [{ role: "user", content: "hi" }]);
  assert.deepEqual(result, appended);
  assert.equal(srv.requests.length, 3);
  const keys = new Set(srv.requests.map((r) => r.headers["idempotency-key"]));
  assert.equal(keys.size, 1);
  assert.ok([...keys][0]);
  assert.deepEqual(new Set(srv.requests.map((r) => r.body)).size, 1);
  assert.deepEqual(JSON.parse(srv.requests[0].body), { messages: [{ role: "user", content: "hi" }] });
});

test("retries are bounded: the typed error after maxRetries, at once for a long Retry-After", async (t) => {
  const srv = await scripted([unavailable(0), unavailable(0), unavailable(0), limited(3600)]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k", retry: { maxRetries: 2 } });
  const err = await loom.me().catch((e) => e);
  assert.ok(err instanceof Unavailable && err instanceof ServerError, String(err));
  assert.equal(err.code, "database_unavailable");
  assert.equal(err.retryAfter, 0);
  assert.equal(srv.requests.length, 3); // the try and two retries

  const started = Date.now();
  const long = await loom.me().catch((e) => e);
  assert.ok(long instanceof RateLimited);
  assert.equal(long.retryAfter, 3600);
  assert.equal(srv.requests.length, 4); // an hour is over maxDelayMs: not waited for
  assert.ok(Date.now() - started < 1000);
});

test("without Retry-After the backoff is used; retry: false never retries", async (t) => {
  const srv = await scripted([unavailable(undefined), { status: 200, body: { role: "service" } }, unavailable(0)]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k", retry: { baseDelayMs: 20 } });
  assert.deepEqual(await loom.me(), { role: "service" });
  assert.equal(srv.requests.length, 2);
  const once = new LoomClient({ baseUrl: srv.base, apiKey: "k", retry: false });
  await assert.rejects(once.me(), Unavailable);
  assert.equal(srv.requests.length, 3);
});

test("an abort signal stops the wait before a retry", async (t) => {
  const srv = await scripted([unavailable(5)]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k" });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("stop")), 100);
  const started = Date.now();
  await assert.rejects(loom.me({ signal: controller.signal }), /stop/);
  assert.ok(Date.now() - started < 2000);
  assert.equal(srv.requests.length, 1);
});

test("a slow answer is LoomConnectionError `timeout`; a POST without a key is not repeated", async (t) => {
  const srv = await scripted([
    { status: 200, body: { role: "service" }, delayMs: 1500 },
    { status: 200, body: { role: "service" }, delayMs: 1500 },
    { status: 201, body: { id: "t" }, delayMs: 1500 },
  ]);
  t.after(srv.close);
  const loom = new LoomClient({ baseUrl: srv.base, apiKey: "k", timeoutMs: 100, retry: { maxRetries: 1, baseDelayMs: 10 } });
  const err = await loom.me().catch((e) => e);
  assert.ok(err instanceof LoomConnectionError, String(err));
  assert.equal(err.code, "timeout");
  assert.equal(srv.requests.length, 2); // a GET is retried once
  const post = await loom.createTenant({ name: "x" }).catch((e) => e);
  assert.ok(post instanceof LoomConnectionError);
  assert.equal(srv.requests.length, 3); // a POST without an Idempotency-Key is not
});
