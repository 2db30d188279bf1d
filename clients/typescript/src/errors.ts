/**
 * Typed errors for the server's error envelope `{"error": {"code", "message", "details"}}`.
 *
 * Every non-2xx answer throws a `LoomError` subclass chosen by status; `code` is the
 * server's stable error code (`not_found`, `version_conflict`, `validation_error`, ...),
 * which is what callers should branch on within one status. A request that never got an
 * answer (connection refused, DNS, reset, timeout) throws `LoomConnectionError`.
 */

/** An error answer of the server (any status without a more specific class). */
export class LoomError extends Error {
  /** HTTP status (0 for `LoomConnectionError`). */
  readonly status: number;
  /** The server's error code (`error.code` of the envelope), or `http_<status>`. */
  readonly code: string;
  /** `error.details` of the envelope (for 422: the invalid fields). */
  readonly details: unknown;
  /** The response headers (empty for `LoomConnectionError`). */
  readonly headers: Headers;
  /** The server's `X-Request-Id` of this answer, when it sent one. */
  readonly requestId: string | undefined;

  constructor(
    message: string,
    init: { status: number; code: string; details?: unknown; headers?: Headers; cause?: unknown },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? null;
    this.headers = init.headers ?? new Headers();
    this.requestId = this.headers.get("x-request-id") ?? undefined;
  }

  override toString(): string {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}`;
  }
}

/** 400: a malformed request (invalid key, scope, cursor, ETag...). */
export class BadRequest extends LoomError {}
/** 401: no key, an unknown key or a revoked one. */
export class Unauthorized extends LoomError {}
/** 403: the key may not do this (wrong role, another agent's data). */
export class Forbidden extends LoomError {}
/** 404: no such session, entry, item, key..., or not visible to this caller. */
export class NotFound extends LoomError {}
/** 409: a stale If-Match version, an Idempotency-Key reused with another body, over budget. */
export class Conflict extends LoomError {}
/** 412: If-Match on a missing entry, or If-None-Match `*` on an existing one. */
export class PreconditionFailed extends LoomError {}
/** 413: a message, value or request over the server's limits. */
export class PayloadTooLarge extends LoomError {}
/** 422: the request does not match the schema (`details` lists the invalid fields). */
export class ValidationError extends LoomError {}
/** 428: the server requires If-Match (PATCH of a memory item, strict shared memory). */
export class PreconditionRequired extends LoomError {}

/** 429: too many requests; `retryAfter` is the wait the server asked for, in seconds. */
export class RateLimited extends LoomError {
  get retryAfter(): number | undefined {
    return retryAfterSeconds(this.headers);
  }
}

/** 5xx: the server failed (no stack trace ever reaches the client). */
export class ServerError extends LoomError {}

/** 503: a backing store (PostgreSQL, Redis) is unavailable; retry after `retryAfter`. */
export class Unavailable extends ServerError {
  get retryAfter(): number | undefined {
    return retryAfterSeconds(this.headers);
  }
}

/** No answer at all: the server is down or unreachable, the connection broke, or the
 * request timed out (`code`: `connection_error` or `timeout`). */
export class LoomConnectionError extends LoomError {}

const BY_STATUS: Record<number, typeof LoomError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  412: PreconditionFailed,
  413: PayloadTooLarge,
  422: ValidationError,
  428: PreconditionRequired,
  429: RateLimited,
  503: Unavailable,
};

/** `Retry-After` in seconds: delta-seconds or an HTTP date; undefined when absent or bad. */
export function retryAfterSeconds(headers: Headers, now: number = Date.now()): number | undefined {
  const raw = headers.get("retry-after")?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Number(raw);
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, (at - now) / 1000);
}

/** The error for an error answer, from its status and already-read body text. */
export function errorFromResponse(status: number, statusText: string, headers: Headers, text: string): LoomError {
  let code = `http_${status}`;
  let message = statusText || "error";
  let details: unknown = null;
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const error =
    parsed && typeof parsed === "object" && "error" in parsed ? (parsed as { error: unknown }).error : undefined;
  if (error && typeof error === "object") {
    const e = error as { code?: unknown; message?: unknown; details?: unknown };
    if (e.code) code = String(e.code);
    if (e.message) message = String(e.message);
    details = e.details ?? null;
  } else if (text) {
    message = text.slice(0, 500);
  }
  const cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : LoomError);
  return new cls(message, { status, code, details, headers });
}
