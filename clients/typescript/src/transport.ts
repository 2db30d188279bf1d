/**
 * The request plumbing: URL and headers, timeouts, typed errors, and retries of 503 / 429
 * answers honouring `Retry-After` (bounded). Only web-platform APIs (`fetch`, `Headers`,
 * `AbortController`, `setTimeout`): Node 18+, browsers and edge runtimes alike.
 */

import { LoomConnectionError, LoomError, errorFromResponse, retryAfterSeconds } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8420";
export const DEFAULT_TIMEOUT_MS = 30_000;
export const VERSION = "0.1.0";

/** How 503 and 429 answers (and, for requests safe to repeat, lost connections) are retried. */
export interface RetryOptions {
  /** Retries after the first try (default 2; 0: never retry). */
  maxRetries?: number;
  /** First backoff when the server sends no `Retry-After`, doubled per retry (default 250). */
  baseDelayMs?: number;
  /** The longest wait between tries (default 10 000). A `Retry-After` longer than this is
   * not waited for: the typed error (`RateLimited` / `Unavailable`, with `retryAfter`) is
   * thrown at once. */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** Default: `LOOM_BASE_URL` where the runtime has environment variables, else
   * http://127.0.0.1:8420. */
  baseUrl?: string;
  /** The API key, sent as `Authorization: Bearer` (default: `LOOM_API_KEY` where the
   * runtime has environment variables). */
  apiKey?: string;
  /** Sent as `X-Agent-Id` on every call (service and admin keys act as this agent). */
  agentId?: string;
  /** Sent as `X-Tenant-Id` on every call (admin keys). */
  tenantId?: string;
  /** Extra headers on every call. */
  headers?: Record<string, string>;
  /** Per try, until the whole answer is read (a watch: until its headers). Default 30 000;
   * 0 or null: none. */
  timeoutMs?: number | null;
  /** Retries of 503 / 429 (see `RetryOptions`); `false`: none. */
  retry?: RetryOptions | false;
  /** A `fetch` to use instead of the global one (e.g. to add tracing). */
  fetch?: typeof fetch;
}

/** Per-call overrides; every method takes them last. */
export interface CallOptions {
  /** `X-Agent-Id` for this call (null: send none). */
  agentId?: string | null;
  /** `X-Tenant-Id` for this call (admin keys; null: send none). */
  tenantId?: string | null;
  /** Extra headers for this call. */
  headers?: Record<string, string>;
  /** Cancels the call (and any wait before a retry); the abort's reason is thrown. */
  signal?: AbortSignal;
  /** Timeout of this call's tries (null or 0: none). */
  timeoutMs?: number | null;
}

export type QueryValue = string | number | boolean | null | undefined | readonly (string | number | boolean)[];

export interface RequestSpec {
  query?: Record<string, QueryValue> | undefined;
  /** A JSON body (serialised once, so a retry sends the same bytes). */
  json?: unknown;
  /** A raw body (with `contentType`). */
  body?: string | Uint8Array | undefined;
  contentType?: string | undefined;
  headers?: Record<string, string | undefined> | undefined;
  options?: CallOptions | undefined;
  /** Also retry a lost connection (the request is safe to repeat). Default: GET, HEAD,
   * PUT, DELETE, and any request with an `Idempotency-Key`. */
  idempotent?: boolean;
  /** Statuses that are answers, not errors (e.g. 304). */
  accept?: readonly number[];
}

function env(name: string): string | undefined {
  // No Node import: `process` is read only when the runtime has one.
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = proc?.env?.[name];
  return value ? value : undefined;
}

/** One path segment, percent-encoded (ids, namespaces, names). */
export function segment(value: string | number): string {
  return encodeURIComponent(String(value));
}

/** A shared-memory key: `/` separates its segments and stays as it is. */
export function keyPath(key: string): string {
  return key.split("/").map(encodeURIComponent).join("/");
}

/** An If-Match / If-None-Match value from a version (7 -> `"7"`) or an ETag as is. */
export function etag(versionOrEtag: number | string): string {
  if (typeof versionOrEtag === "number") {
    if (!Number.isInteger(versionOrEtag)) throw new TypeError("a version is an integer or an ETag string");
    return `"${versionOrEtag}"`;
  }
  return versionOrEtag;
}

/** A random idempotency key (crypto.randomUUID where the runtime has it). */
export function newIdempotencyKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string; getRandomValues?: (a: Uint8Array) => Uint8Array } })
    .crypto;
  if (c?.randomUUID) return c.randomUUID();
  const bytes = new Uint8Array(16);
  if (c?.getRandomValues) c.getRandomValues(bytes);
  else for (let i = 0; i < 16; i++) bytes[i] = Math.floor(Math.random() * 256);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const SAFE = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** Holds the base URL, key, default agent / tenant and retry policy; sends requests. */
export class Transport {
  readonly baseUrl: string;
  readonly agentId: string | undefined;
  readonly tenantId: string | undefined;
  readonly timeoutMs: number | null;
  readonly retry: Required<RetryOptions>;
  private readonly defaultHeaders: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? env("LOOM_BASE_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.agentId = options.agentId;
    this.tenantId = options.tenantId;
    this.timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
    const retry = options.retry === false ? { maxRetries: 0 } : (options.retry ?? {});
    this.retry = {
      maxRetries: Math.max(0, retry.maxRetries ?? 2),
      baseDelayMs: Math.max(0, retry.baseDelayMs ?? 250),
      maxDelayMs: Math.max(0, retry.maxDelayMs ?? 10_000),
    };
    const apiKey = options.apiKey ?? env("LOOM_API_KEY");
    this.defaultHeaders = { Accept: "application/json", ...(options.headers ?? {}) };
    if (apiKey) this.defaultHeaders["Authorization"] = `Bearer ${apiKey}`;
    const f = options.fetch ?? (globalThis.fetch as typeof fetch | undefined);
    if (!f) throw new Error("no fetch: use Node 18+, or pass `fetch` in the client options");
    // bound: some runtimes refuse a fetch called as a method of another object
    this.fetchImpl = options.fetch ? options.fetch : (input, init) => f(input, init);
  }

  /** A copy with other defaults (sharing nothing mutable). */
  with(overrides: { agentId?: string | undefined; tenantId?: string | undefined }): Transport {
    const copy = Object.create(Transport.prototype) as Transport;
    Object.assign(copy, this, overrides);
    return copy;
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      if (Array.isArray(value)) for (const v of value) params.append(name, String(v));
      else params.append(name, String(value));
    }
    const qs = params.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ""}`;
  }

  headers(spec: RequestSpec): Headers {
    const options = spec.options ?? {};
    const h = new Headers(this.defaultHeaders);
    const agent = options.agentId !== undefined ? options.agentId : this.agentId;
    const tenant = options.tenantId !== undefined ? options.tenantId : this.tenantId;
    if (agent) h.set("X-Agent-Id", agent);
    if (tenant) h.set("X-Tenant-Id", tenant);
    if (spec.contentType) h.set("Content-Type", spec.contentType);
    else if (spec.json !== undefined) h.set("Content-Type", "application/json");
    for (const [k, v] of Object.entries(options.headers ?? {})) h.set(k, v);
    for (const [k, v] of Object.entries(spec.headers ?? {})) if (v !== undefined) h.set(k, v);
    return h;
  }

  /** Send a request and hand the successful answer to `read` (under the same timeout);
   * throw the typed error of an error answer; retry 503 / 429 as configured. */
  async exchange<T>(method: string, path: string, spec: RequestSpec, read: (r: Response) => Promise<T>): Promise<T> {
    const url = this.url(path, spec.query);
    const headers = this.headers(spec);
    const body = spec.json !== undefined ? JSON.stringify(spec.json) : spec.body;
    const idempotent = spec.idempotent ?? (SAFE.has(method) || headers.has("Idempotency-Key"));
    const signal = spec.options?.signal;
    const timeoutMs = spec.options?.timeoutMs !== undefined ? spec.options.timeoutMs : this.timeoutMs;
    const init = { method, headers, body: body as BodyInit | undefined };
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.attempt(url, path, init, spec, read, signal, timeoutMs ?? null);
      if ("value" in outcome) return outcome.value;
      const { error, retryAfterMs } = outcome;
      if (attempt >= this.retry.maxRetries) throw error;
      let waitMs: number;
      if (error instanceof LoomConnectionError) {
        if (!idempotent) throw error; // it may have been done: not ours to repeat
        waitMs = this.backoff(attempt);
      } else if (retryAfterMs !== undefined) {
        if (retryAfterMs > this.retry.maxDelayMs) throw error; // too long: the caller decides
        waitMs = retryAfterMs;
      } else {
        waitMs = this.backoff(attempt);
      }
      await sleep(waitMs, signal);
    }
  }

  /** One try: the value, or the error to retry (a lost connection, a 503 or a 429). */
  private async attempt<T>(
    url: string,
    path: string,
    init: { method: string; headers: Headers; body: BodyInit | undefined },
    spec: RequestSpec,
    read: (r: Response) => Promise<T>,
    signal: AbortSignal | undefined,
    timeoutMs: number | null,
  ): Promise<{ value: T } | { error: LoomError; retryAfterMs?: number | undefined }> {
    if (signal?.aborted) throw signal.reason;
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    let timedOut = false;
    const timer = timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, timeoutMs)
      : undefined;
    const what = `${init.method} ${path}`;
    const lost = (cause: unknown, during: string) =>
      new LoomConnectionError(
        timedOut
          ? `no answer to ${what} from ${this.baseUrl} within ${timeoutMs} ms`
          : `${during} ${what} at ${this.baseUrl}: ${describe(cause)}`,
        { status: 0, code: timedOut ? "timeout" : "connection_error", cause },
      );
    try {
      let response: Response;
      try {
        response = await this.fetchImpl(url, { ...init, signal: controller.signal });
      } catch (cause) {
        if (signal?.aborted) throw signal.reason;
        return { error: lost(cause, "cannot reach Loom for") };
      }
      if (response.ok || spec.accept?.includes(response.status)) {
        try {
          return { value: await read(response) };
        } catch (cause) {
          if (signal?.aborted) throw signal.reason;
          if (timedOut || cause instanceof TypeError || (cause as Error | undefined)?.name === "AbortError") {
            throw lost(cause, "the answer broke off for");
          }
          throw cause;
        }
      }
      const text = await response.text().catch(() => "");
      const error = errorFromResponse(response.status, response.statusText, response.headers, text);
      if (response.status !== 503 && response.status !== 429) throw error;
      const after = retryAfterSeconds(response.headers);
      return { error, retryAfterMs: after === undefined ? undefined : after * 1000 };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Exponential backoff with jitter (between half and all of base * 2^attempt), capped. */
  private backoff(attempt: number): number {
    const full = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** attempt);
    return full / 2 + Math.random() * (full / 2);
  }

  /** A JSON answer. */
  json<T>(method: string, path: string, spec: RequestSpec = {}): Promise<T> {
    return this.exchange(method, path, spec, async (r) => {
      const text = await r.text();
      return (text ? JSON.parse(text) : null) as T;
    });
  }

  /** An answer with no body worth reading (204). */
  empty(method: string, path: string, spec: RequestSpec = {}): Promise<void> {
    return this.exchange(method, path, spec, async (r) => {
      await r.arrayBuffer();
    });
  }
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as { cause?: unknown }).cause;
    const code = inner && typeof inner === "object" && "code" in inner ? String((inner as { code: unknown }).code) : "";
    return code ? `${cause.message} (${code})` : cause.message;
  }
  return String(cause);
}
