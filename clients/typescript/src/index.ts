/**
 * @loom-memory/client: a typed client for Loom Memory on `fetch` (Node 18+, browsers,
 * edge runtimes).
 *
 * ```ts
 * import { LoomClient, NotFound } from "@loom-memory/client";
 * const loom = new LoomClient({ baseUrl: "http://127.0.0.1:8420", apiKey, agentId: "planner" });
 * const session = await loom.createSession({ config: { max_context_tokens: 200_000 } });
 * await loom.appendMessages(session.id, [{ role: "user", content: "Plan the migration" }]);
 * const ctx = await loom.context(session.id, "anthropic"); // { system, messages, tools }
 * ```
 */

export {
  LoomClient,
  OPERATIONS,
  isBlob,
  type AnthropicContextParams,
  type AppendOptions,
  type ContextExtras,
  type OpenAIContextParams,
  type Preconditions,
  type SharedMemoryBytesParams,
  type SharedMemoryPutParams,
} from "./client.js";
export {
  BadRequest,
  Conflict,
  Forbidden,
  LoomConnectionError,
  LoomError,
  NotFound,
  PayloadTooLarge,
  PreconditionFailed,
  PreconditionRequired,
  RateLimited,
  ServerError,
  Unauthorized,
  Unavailable,
  ValidationError,
  errorFromResponse,
  retryAfterSeconds,
} from "./errors.js";
export {
  DEFAULT_BASE_URL,
  DEFAULT_TIMEOUT_MS,
  VERSION,
  etag,
  keyPath,
  newIdempotencyKey,
  segment,
  type CallOptions,
  type ClientOptions,
  type RetryOptions,
} from "./transport.js";
export {
  SSEParser,
  WatchStream,
  type ClosedEvent,
  type DeleteEvent,
  type DroppedEvent,
  type HeartbeatEvent,
  type PutEvent,
  type ReadyEvent,
  type UnknownEvent,
  type WatchEvent,
} from "./watch.js";
export type * from "./types.js";
