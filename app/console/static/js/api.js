// The public REST API with the signed-in key. The key lives in this tab's sessionStorage
// only: it is sent as an Authorization header, never in a URL, a cookie or a log line.

const KEY = "loom.console.key";
const CTX = "loom.console.ctx";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** Where the API is: the page is served at <root>/console. */
export function root() {
  const path = location.pathname;
  return path.slice(0, path.lastIndexOf("/console"));
}

export const auth = {
  get key() { return sessionStorage.getItem(KEY); },
  get ctx() { return JSON.parse(sessionStorage.getItem(CTX) || "{}"); },
  signIn(key, ctx) {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(CTX, JSON.stringify(ctx));
  },
  update(changes) {
    sessionStorage.setItem(CTX, JSON.stringify({...this.ctx, ...changes}));
  },
  signOut() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(CTX);
  },
};

function headers(key, ctx, {agent = true} = {}) {
  const out = {Authorization: `Bearer ${key}`};
  if (ctx.tenant) out["X-Tenant-Id"] = ctx.tenant;
  if (agent && ctx.agent && ctx.role !== "agent") out["X-Agent-Id"] = ctx.agent;
  return out;
}

function url(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  }
  const qs = params.toString();
  return root() + path + (qs ? `?${qs}` : "");
}

async function failure(resp) {
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON */ }
  const e = body && body.error;
  return new ApiError(resp.status, e ? e.code : "http_error",
                      e ? e.message : resp.statusText, e ? e.details : null);
}

/**
 * Call the API: api("GET", "/v1/sessions", {query, body}). JSON answers are parsed, others
 * returned as text. `key`/`ctx` override the signed-in ones (the sign-in probe).
 * `agent: false` leaves out X-Agent-Id.
 */
export async function api(method, path, opts = {}) {
  const key = opts.key ?? auth.key;
  const ctx = opts.ctx ?? auth.ctx;
  const init = {method, headers: headers(key, ctx, opts), cache: "no-store",
                signal: opts.signal};
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const resp = await fetch(url(path, opts.query), init);
  if (!resp.ok) throw await failure(resp);
  if (resp.status === 204) return null;
  const type = resp.headers.get("content-type") || "";
  return type.includes("json") ? resp.json() : resp.text();
}

/** A public route without the key (health, readiness, metrics). */
export async function plain(path) {
  const resp = await fetch(root() + path, {cache: "no-store"});
  const type = resp.headers.get("content-type") || "";
  return {status: resp.status, body: type.includes("json") ? await resp.json() : await resp.text()};
}

/**
 * Server-Sent Events with the key in a header (EventSource cannot send one): calls
 * onEvent(name, data) per event until `signal` aborts or the stream ends.
 */
export async function sse(path, query, onEvent, signal) {
  const resp = await fetch(url(path, query), {
    headers: {...headers(auth.key, auth.ctx), Accept: "text/event-stream"},
    cache: "no-store", signal});
  if (!resp.ok) throw await failure(resp);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) {
        let parsed = data.join("\n");
        try { parsed = JSON.parse(parsed); } catch { /* keep the text */ }
        onEvent(name, parsed);
      }
    }
  }
}
