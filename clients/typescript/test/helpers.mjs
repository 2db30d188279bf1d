// Shared by the tests: the live server's address and keys (from the environment the Python
// driver tests/client_ts/test_typescript_client.py sets), clients and unique names.
import { randomUUID } from "node:crypto";

import { LoomClient } from "../dist/index.js";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/client_ts (pytest), which starts a live server`);
  return value;
}

export const URL = required("LOOM_URL");
export const KEY = required("LOOM_KEY");
export const ADMIN_KEY = process.env.LOOM_ADMIN_KEY;

/** A short unique suffix for ids and names. */
export function uid(prefix = "ts") {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** The client on the tenant's service key, acting as `agentId`. */
export function client(options = {}) {
  return new LoomClient({ baseUrl: URL, apiKey: KEY, agentId: "ts-agent", ...options });
}

/** An admin client (tenants, keys, the tenant export). */
export function admin() {
  if (!ADMIN_KEY) throw new Error("LOOM_ADMIN_KEY is not set");
  return new LoomClient({ baseUrl: URL, apiKey: ADMIN_KEY });
}

/** Everything an async iterable yields. */
export async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** A client whose fetch records every request (method, URL, headers) before sending it. */
export function recording(options = {}) {
  const requests = [];
  const loom = client({
    ...options,
    fetch: (url, init) => {
      requests.push({ method: init?.method ?? "GET", url: String(url), headers: new Headers(init?.headers) });
      return fetch(url, init);
    },
  });
  return { loom, requests };
}
