/**
 * The Loom Memory client: one method per REST operation of `openapi/openapi.json`, on
 * `fetch`. Request fields are spelled as the API spells them (snake_case, typed from the
 * generated OpenAPI types); the client's own options (`idempotencyKey`, `ifMatch`,
 * `signal`...) are camelCase and come last.
 */

import {
  type CallOptions,
  type ClientOptions,
  type QueryValue,
  Transport,
  etag,
  keyPath,
  newIdempotencyKey,
  segment,
} from "./transport.js";
import { LoomError } from "./errors.js";
import { WatchStream } from "./watch.js";
import type * as T from "./types.js";

/** `CallOptions` plus an `Idempotency-Key` (generated when not given). */
export interface AppendOptions extends CallOptions {
  /** A retry with the same key returns the first result (`replayed: true`) and appends
   * nothing; the same key with another body is a 409. Default: a new random key per call,
   * kept across this call's own retries. */
  idempotencyKey?: string;
}

/** Compare-and-set headers: a version number (7 -> `"7"`) or an ETag string. */
export interface Preconditions extends CallOptions {
  /** Write / delete only at this version: a stale one is 409 `Conflict`
   * (`version_conflict`); If-Match on a missing entry is 412 `PreconditionFailed`. */
  ifMatch?: number | string;
  /** `"*"`: create only (412 `PreconditionFailed` when the key exists). */
  ifNoneMatch?: number | string;
}

export interface SharedMemoryPutParams {
  scope_id?: string | null;
  metadata?: Record<string, unknown>;
  ttl_seconds?: number | null;
}

export interface SharedMemoryBytesParams extends SharedMemoryPutParams {
  /** Default `application/octet-stream` for bytes, `text/plain; charset=utf-8` for text. */
  content_type?: string;
}

type JsonObject = Record<string, unknown>;

/** What `context()` adds to the SDK arguments; not enumerable, so `...ctx` leaves it out. */
export interface ContextExtras {
  /** The build's id (its manifest, when recorded: `getContextManifest`). */
  readonly contextId: string;
  readonly format: string;
  /** The whole built context: tokens per layer, usage, recall, compression. */
  readonly response: T.ContextResponse;
}

/** For `anthropic.messages.create({ model, max_tokens, ...ctx })`. */
export type AnthropicContextParams = {
  system: unknown;
  messages: JsonObject[];
  tools: JsonObject[];
} & ContextExtras;

/** For `openai.chat.completions.create({ model, ...ctx })` (the system prompt is the first
 * message; `tools` only when there are some: the API refuses an empty list). */
export type OpenAIContextParams = {
  messages: JsonObject[];
  tools?: JsonObject[];
} & ContextExtras;

const NDJSON = "application/x-ndjson";

function session(sessionId: string, rest = ""): string {
  return `/v1/sessions/${segment(sessionId)}${rest}`;
}

function entry(namespace: string, key: string): string {
  return `/v1/shared-memory/${segment(namespace)}/${keyPath(key)}`;
}

function preconditions(p: Preconditions | undefined): Record<string, string | undefined> {
  return {
    "If-Match": p?.ifMatch === undefined ? undefined : etag(p.ifMatch),
    "If-None-Match": p?.ifNoneMatch === undefined ? undefined : etag(p.ifNoneMatch),
  };
}

function q(params: object | undefined): Record<string, QueryValue> {
  return (params ?? {}) as Record<string, QueryValue>;
}

function blobOf(response: Response, content: Uint8Array): T.SharedMemoryBlob {
  const h = response.headers;
  const version = h.get("x-loom-version");
  const compressed = h.get("x-loom-compressed");
  return {
    content,
    contentType: h.get("content-type") ?? "application/octet-stream",
    etag: h.get("etag"),
    version: version && /^\d+$/.test(version) ? Number(version) : null,
    checksum: h.get("x-loom-checksum"),
    refId: h.get("x-loom-ref-id"),
    compressed: compressed === null ? null : compressed === "true",
    location: h.get("x-loom-storage-location"),
  };
}

async function entryOrBlob(response: Response): Promise<T.SharedMemoryEntry | T.SharedMemoryBlob> {
  const mediaType = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (mediaType === "application/json") return (await response.json()) as T.SharedMemoryEntry;
  return blobOf(response, new Uint8Array(await response.arrayBuffer()));
}

/** A raw shared-memory value (`getSharedMemory` of a non-JSON entry). */
export function isBlob(value: T.SharedMemoryEntry | T.SharedMemoryBlob): value is T.SharedMemoryBlob {
  return value !== null && typeof value === "object" && "content" in value && value.content instanceof Uint8Array;
}

function withExtras<P extends object>(params: P, response: T.ContextResponse): P & ContextExtras {
  Object.defineProperties(params, {
    contextId: { value: response.context_id, enumerable: false },
    format: { value: response.format, enumerable: false },
    response: { value: response, enumerable: false },
  });
  return params as P & ContextExtras;
}

/** Follow the cursors of a list, page by page, yielding its items. */
async function* paginate<I>(
  page: (cursor: string | undefined) => Promise<{ items: I[]; next_cursor?: string | null }>,
): AsyncGenerator<I, void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const result = await page(cursor);
    yield* result.items;
    if (!result.next_cursor) return;
    cursor = result.next_cursor;
  }
}

type ToolShape = "anthropic" | "openai";

function toolUseOf(call: unknown): [ToolShape, { type: "tool_use"; id: string; name: string; input: unknown }] {
  const data = (call ?? {}) as JsonObject;
  if (data["type"] === "tool_use") {
    return ["anthropic", { type: "tool_use", id: String(data["id"]), name: String(data["name"]), input: data["input"] ?? {} }];
  }
  const fn = data["function"] as JsonObject | undefined;
  if (fn && typeof fn === "object" && "id" in data) {
    const args = fn["arguments"];
    let input: unknown = args;
    if (args === undefined || args === null || args === "") input = {};
    else if (typeof args === "string") {
      try {
        input = JSON.parse(args);
      } catch {
        input = args; // the server answers it with an INVALID_PARAMETER tool error the model can read
      }
    }
    return ["openai", { type: "tool_use", id: String(data["id"]), name: String(fn["name"]), input }];
  }
  throw new TypeError("not a tool call: expected an Anthropic tool_use block or an OpenAI tool_calls entry");
}

function isToolCall(item: unknown): boolean {
  if (!item || typeof item !== "object") return false;
  const data = item as JsonObject;
  return data["type"] === "tool_use" || (typeof data["function"] === "object" && data["function"] !== null && "id" in data);
}

export class LoomClient {
  private readonly http: Transport;

  constructor(options: ClientOptions = {}) {
    this.http = new Transport(options);
  }

  /** The base URL (no trailing slash). */
  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /** The default `X-Agent-Id`. */
  get agentId(): string | undefined {
    return this.http.agentId;
  }

  /** A client acting as `agentId` (same key, base URL and options). */
  withAgent(agentId: string | undefined): LoomClient {
    const copy = Object.create(LoomClient.prototype) as LoomClient;
    (copy as unknown as { http: Transport }).http = this.http.with({ agentId });
    return copy;
  }

  /** A client acting in `tenantId` (admin keys). */
  withTenant(tenantId: string | undefined): LoomClient {
    const copy = Object.create(LoomClient.prototype) as LoomClient;
    (copy as unknown as { http: Transport }).http = this.http.with({ tenantId });
    return copy;
  }

  // --- sessions and messages ----------------------------------------------------------

  /** Start a session (for `agent_id`, default: the calling agent; `user_id`: the person). */
  createSession(body: T.SessionCreate = {}, options?: CallOptions): Promise<T.Session> {
    return this.http.json("POST", "/v1/sessions", { json: body, options });
  }

  /** One page of sessions, oldest first (agent keys see only their own). */
  listSessions(params?: T.QueryOf<"list_sessions">, options?: CallOptions): Promise<T.SessionList> {
    return this.http.json("GET", "/v1/sessions", { query: q(params), options });
  }

  /** Every session, following the cursors (`limit`: the page size). */
  iterSessions(params?: T.PageQuery<"list_sessions">, options?: CallOptions): AsyncGenerator<T.Session, void, undefined> {
    return paginate((cursor) => this.listSessions({ ...params, cursor }, options));
  }

  /** A session with its tokens per layer. */
  getSession(sessionId: string, options?: CallOptions): Promise<T.Session> {
    return this.http.json("GET", session(sessionId), { options });
  }

  /** Change config fields (others keep their values) and/or replace the metadata. */
  updateSession(sessionId: string, body: T.SessionUpdate, options?: CallOptions): Promise<T.Session> {
    return this.http.json("PATCH", session(sessionId), { json: body, options });
  }

  /** Delete a session and everything in it. */
  deleteSession(sessionId: string, options?: CallOptions): Promise<void> {
    return this.http.empty("DELETE", session(sessionId), { options });
  }

  /** Append messages (Anthropic or OpenAI shape) in one transaction, with an
   * `Idempotency-Key` (yours, or a random one kept across this call's retries): a retried
   * request returns the first result with `replayed: true` and appends nothing. */
  appendMessages(sessionId: string, messages: T.MessageIn[], options?: AppendOptions): Promise<T.MessagesAppended> {
    const { idempotencyKey, ...call } = options ?? {};
    return this.http.json("POST", session(sessionId, "/messages"), {
      json: { messages },
      headers: { "Idempotency-Key": idempotencyKey ?? newIdempotencyKey() },
      options: call,
    });
  }

  /** One page of the full history (the swap), oldest first. */
  listMessages(sessionId: string, params?: T.QueryOf<"list_messages">, options?: CallOptions): Promise<T.MessageList> {
    return this.http.json("GET", session(sessionId, "/messages"), { query: q(params), options });
  }

  /** Every message (after `after_seq`), following the cursors (`limit`: the page size). */
  iterMessages(
    sessionId: string,
    params?: Omit<T.PageQuery<"list_messages">, "offset">,
    options?: CallOptions,
  ): AsyncGenerator<T.Message, void, undefined> {
    return paginate((cursor) =>
      this.listMessages(sessionId, cursor ? { limit: params?.limit, cursor } : { ...params }, options),
    );
  }

  /** The built context with its accounting (`format: "raw"`: every layer separately) and
   * its `context_id`; `record` stores its manifest, `manifest` returns it. */
  buildContext(sessionId: string, body: T.ContextRequest = {}, options?: CallOptions): Promise<T.ContextResponse> {
    return this.http.json("POST", session(sessionId, "/context"), { json: body, options });
  }

  /** The context as the provider SDK's arguments: `...ctx` into
   * `anthropic.messages.create({ model, max_tokens, ...ctx })` or
   * `openai.chat.completions.create({ model, ...ctx })`. `ctx.contextId` and
   * `ctx.response` (the accounting) are not enumerable, so the spread leaves them out. */
  context(
    sessionId: string,
    format?: "anthropic",
    body?: Omit<T.ContextRequest, "format">,
    options?: CallOptions,
  ): Promise<AnthropicContextParams>;
  context(
    sessionId: string,
    format: "openai",
    body?: Omit<T.ContextRequest, "format">,
    options?: CallOptions,
  ): Promise<OpenAIContextParams>;
  async context(
    sessionId: string,
    format: "anthropic" | "openai" = "anthropic",
    body: Omit<T.ContextRequest, "format"> = {},
    options?: CallOptions,
  ): Promise<AnthropicContextParams | OpenAIContextParams> {
    const built = await this.buildContext(sessionId, { ...body, format }, options);
    const messages = built.messages ?? [];
    const tools = built.tools ?? [];
    if (built.format === "anthropic") {
      return withExtras({ system: built.system ? built.system : [], messages, tools }, built);
    }
    if (built.format === "openai") {
      return withExtras(tools.length ? { messages, tools } : { messages }, built);
    }
    throw new Error(`no SDK arguments for the ${JSON.stringify(built.format)} format`);
  }

  // --- recorded contexts (manifests) ------------------------------------------------------

  /** One page of the session's recorded builds, newest first. */
  listContexts(sessionId: string, params?: T.QueryOf<"list_contexts">, options?: CallOptions): Promise<T.ContextList> {
    return this.http.json("GET", session(sessionId, "/contexts"), { query: q(params), options });
  }

  /** Every recorded build, newest first, following the cursors. */
  iterContexts(
    sessionId: string,
    params?: T.PageQuery<"list_contexts">,
    options?: CallOptions,
  ): AsyncGenerator<T.ContextSummary, void, undefined> {
    return paginate((cursor) => this.listContexts(sessionId, { ...params, cursor }, options));
  }

  /** What the model saw in a recorded build: its blocks, sources and why. */
  getContextManifest(sessionId: string, contextId: string, options?: CallOptions): Promise<T.ContextManifest> {
    return this.http.json("GET", session(sessionId, `/contexts/${segment(contextId)}`), { options });
  }

  /** The recorded build rendered again from its sources (the same SHA-256); a source
   * changed or erased since is a 409 `Conflict` naming it. */
  replayContext(
    sessionId: string,
    contextId: string,
    params?: T.QueryOf<"replay_context">,
    options?: CallOptions,
  ): Promise<T.ContextReplay> {
    return this.http.json("POST", session(sessionId, `/contexts/${segment(contextId)}/replay`), {
      query: q(params),
      options,
    });
  }

  /** Blocks added, removed and changed from build `contextId` to `otherId`. */
  diffContexts(sessionId: string, contextId: string, otherId: string, options?: CallOptions): Promise<T.ContextDiff> {
    return this.http.json("GET", session(sessionId, `/contexts/${segment(contextId)}/diff/${segment(otherId)}`), {
      options,
    });
  }

  // --- memory layers, kernel, search, tools, jobs -------------------------------------

  /** The layers: L1 seqs, L2 summaries, promoted seqs, tokens and usage. */
  getMemory(sessionId: string, options?: CallOptions): Promise<T.Memory> {
    return this.http.json("GET", session(sessionId, "/memory"), { options });
  }

  /** Queue a compression, or with `wait: true` compress now. */
  compress(sessionId: string, params?: T.QueryOf<"compress_memory">, options?: CallOptions): Promise<T.CompressResult> {
    return this.http.json("POST", session(sessionId, "/memory/compress"), { query: q(params), options });
  }

  /** Copy older messages back into the context (by `seqs` and/or `start_seq`..`end_seq`). */
  promote(sessionId: string, body: T.PromoteRequest, options?: CallOptions): Promise<T.PromoteResult> {
    return this.http.json("POST", session(sessionId, "/memory/promote"), { json: body, options });
  }

  /** Remove every promoted message from the context. */
  clearPromoted(sessionId: string, options?: CallOptions): Promise<T.Cleared> {
    return this.http.json("DELETE", session(sessionId, "/memory/promoted"), { options });
  }

  /** One page of the L2 snapshots archived in swap, newest first. */
  listSnapshots(sessionId: string, params?: T.QueryOf<"list_memory_snapshots">, options?: CallOptions): Promise<T.SnapshotList> {
    return this.http.json("GET", session(sessionId, "/memory/snapshots"), { query: q(params), options });
  }

  /** Every L2 snapshot, newest first, following the cursors. */
  iterSnapshots(
    sessionId: string,
    params?: T.PageQuery<"list_memory_snapshots">,
    options?: CallOptions,
  ): AsyncGenerator<T.Snapshot, void, undefined> {
    return paginate((cursor) => this.listSnapshots(sessionId, { ...params, cursor }, options));
  }

  /** Tools, cached schemas and the latest large result reference. */
  getKernel(sessionId: string, options?: CallOptions): Promise<T.Kernel> {
    return this.http.json("GET", session(sessionId, "/kernel"), { options });
  }

  /** Replace the session's tool definitions (Anthropic shape). */
  putKernelTools(sessionId: string, tools: T.ToolDefinition[], options?: CallOptions): Promise<T.Kernel> {
    return this.http.json("PUT", session(sessionId, "/kernel/tools"), { json: { tools }, options });
  }

  /** Cache a schema (an LRU of 10: `evicted` names what fell out). */
  putKernelSchema(sessionId: string, name: string, schema: unknown, options?: CallOptions): Promise<T.KernelSchema> {
    return this.http.json("PUT", session(sessionId, `/kernel/schemas/${segment(name)}`), { json: { schema }, options });
  }

  /** Read a cached schema (which makes it the most recently used). */
  getKernelSchema(sessionId: string, name: string, options?: CallOptions): Promise<T.KernelSchema> {
    return this.http.json("GET", session(sessionId, `/kernel/schemas/${segment(name)}`), { options });
  }

  /** Search this session's swap (`promote: true` puts the hits back in the context). */
  searchSession(sessionId: string, body: T.SessionSearchRequest, options?: CallOptions): Promise<T.SearchResult> {
    return this.http.json("POST", session(sessionId, "/search"), { json: body, options });
  }

  /** Search the sessions of an agent (`scope: "agent"`, default), of a user (`scope:
   * "user"` with `user_id`) or of the whole tenant. */
  search(body: T.SearchRequest, options?: CallOptions): Promise<T.SearchResult> {
    return this.http.json("POST", "/v1/search", { json: body, options });
  }

  /** The built-in tools (recall / search the conversation, shared memory) as Anthropic
   * tool definitions or OpenAI function tools. */
  listTools(sessionId: string, params?: T.QueryOf<"list_session_tools">, options?: CallOptions): Promise<T.ToolList> {
    return this.http.json("GET", session(sessionId, "/tools"), { query: q(params), options });
  }

  /** Execute a built-in tool; tool failures come back as `is_error: true` results. */
  callTool(sessionId: string, name: string, input: unknown = {}, toolUseId?: string, options?: CallOptions): Promise<T.ToolResult> {
    const block = { type: "tool_use", id: toolUseId ?? `toolu_${newIdempotencyKey().replace(/-/g, "")}`, name, input };
    return this.http.json("POST", session(sessionId, "/tool-calls"), { json: block, options });
  }

  /** Execute a model's tool call and return its result in the same shape: an Anthropic
   * `tool_use` block gives a `tool_result` block, an OpenAI `tool_calls` entry gives a
   * `{ role: "tool", ... }` message. */
  async executeToolCall(sessionId: string, call: unknown, options?: CallOptions): Promise<JsonObject> {
    const [shape, block] = toolUseOf(call);
    const result = await this.callTool(sessionId, block.name, block.input, block.id, options);
    if (shape === "anthropic") {
      return { type: "tool_result", tool_use_id: result.tool_use_id, content: result.content, is_error: result.is_error };
    }
    return { role: "tool", tool_call_id: result.tool_use_id, content: result.content };
  }

  /** Execute every tool call among `items` in order (an Anthropic response's `content`, or
   * an OpenAI message's `tool_calls`); other blocks are skipped. */
  async executeToolCalls(sessionId: string, items: readonly unknown[] | null | undefined, options?: CallOptions): Promise<JsonObject[]> {
    const results: JsonObject[] = [];
    for (const item of items ?? []) if (isToolCall(item)) results.push(await this.executeToolCall(sessionId, item, options));
    return results;
  }

  /** One page of the tenant's background jobs, most recently changed first. */
  listJobs(params?: T.QueryOf<"list_jobs">, options?: CallOptions): Promise<T.JobList> {
    return this.http.json("GET", "/v1/jobs", { query: q(params), options });
  }

  /** Every job, following the cursors. */
  iterJobs(params?: T.PageQuery<"list_jobs">, options?: CallOptions): AsyncGenerator<T.Job, void, undefined> {
    return paginate((cursor) => this.listJobs({ ...params, cursor }, options));
  }

  // --- knowledge items and facts ------------------------------------------------------

  /** Store an item in `task/<id>`, `project/<id>` or `global`. */
  createMemoryItem(body: T.MemoryItemCreate, options?: CallOptions): Promise<T.MemoryItem> {
    return this.http.json("POST", "/v1/memory-items", { json: body, options });
  }

  /** One item; its `version` is its ETag (for `updateMemoryItem`). */
  getMemoryItem(itemId: string, options?: CallOptions): Promise<T.MemoryItem> {
    return this.http.json("GET", `/v1/memory-items/${segment(itemId)}`, { options });
  }

  deleteMemoryItem(itemId: string, options?: CallOptions): Promise<void> {
    return this.http.empty("DELETE", `/v1/memory-items/${segment(itemId)}`, { options });
  }

  /** Correct an item (a fact): `changes` holds the fields to change (text, importance,
   * tags, key, valid_from, invalid_at; `invalid_at: null` makes it true again) and
   * `reason`. `ifMatch` is the version it corrects (or its ETag): a stale one is the 409
   * `Conflict` `version_conflict` (`details.current_version`). */
  updateMemoryItem(itemId: string, ifMatch: number | string, changes: T.MemoryItemUpdate, options?: CallOptions): Promise<T.MemoryItem> {
    return this.http.json("PATCH", `/v1/memory-items/${segment(itemId)}`, {
      json: changes,
      headers: { "If-Match": etag(ifMatch) },
      options,
    });
  }

  /** One page of items matching `filters`; `params.as_of`: the items true at that time,
   * each as it read then; `params.include_invalidated`: superseded facts too. */
  queryMemoryItems(
    body: T.MemoryItemQuery = {},
    params?: T.QueryOf<"query_memory_items">,
    options?: CallOptions,
  ): Promise<T.MemoryItemList> {
    return this.http.json("POST", "/v1/memory-items/query", { json: body, query: q(params), options });
  }

  /** Every matching item, following the cursors (`body.limit`: the page size). */
  iterMemoryItems(
    body: Omit<T.MemoryItemQuery, "cursor"> = {},
    params?: T.QueryOf<"query_memory_items">,
    options?: CallOptions,
  ): AsyncGenerator<T.MemoryItem, void, undefined> {
    return paginate((cursor) => this.queryMemoryItems({ ...body, cursor }, params, options));
  }

  /** A fact's versions (oldest first), what replaced it and what it replaced; with
   * `as_of`, also the version in effect then (`as_of_version`). */
  getMemoryItemHistory(
    itemId: string,
    params?: T.QueryOf<"get_memory_item_history">,
    options?: CallOptions,
  ): Promise<T.MemoryItemHistory> {
    return this.http.json("GET", `/v1/memory-items/${segment(itemId)}/history`, { query: q(params), options });
  }

  /** Move an item one tier up: task -> project (needs `project_id`) -> global. */
  promoteMemoryItem(itemId: string, body: T.BodyOf<"promote_memory_item"> = {}, options?: CallOptions): Promise<T.MemoryItem> {
    return this.http.json("POST", `/v1/memory-items/${segment(itemId)}/promote`, { json: body, options });
  }

  /** Delete a scope's items (only the matching ones with `filters`); `global` needs `confirm`. */
  clearMemoryItems(body: T.ClearRequest, options?: CallOptions): Promise<T.ClearResult> {
    return this.http.json("POST", "/v1/memory-items/clear", { json: body, options });
  }

  /** Queue fact extraction, or with `wait: true` extract now. */
  extractFacts(sessionId: string, params?: T.QueryOf<"extract_facts">, options?: CallOptions): Promise<T.ExtractResult> {
    return this.http.json("POST", session(sessionId, "/memory/extract"), { query: q(params), options });
  }

  /** The session's fact extraction: watermark, latest job and LLM usage. */
  getFactExtraction(sessionId: string, options?: CallOptions): Promise<T.FactExtraction> {
    return this.http.json("GET", session(sessionId, "/memory/extract"), { options });
  }

  /** Promote the listed task items to the project, then clear the task's memory. */
  completeTask(taskId: string, body: T.BodyOf<"complete_task"> = {}, options?: CallOptions): Promise<T.TaskCompleteResult> {
    return this.http.json("POST", `/v1/tasks/${segment(taskId)}/complete`, { json: body, options });
  }

  /** Items of the task, project and global tiers within `budget_tokens`. */
  createContextPackage(body: T.ContextPackageRequest, options?: CallOptions): Promise<T.ContextPackage> {
    return this.http.json("POST", "/v1/context-packages", { json: body, options });
  }

  getLearned(agentId: string, params?: T.QueryOf<"get_learned">, options?: CallOptions): Promise<T.Learned> {
    return this.http.json("GET", `/v1/agents/${segment(agentId)}/learned`, { query: q(params), options });
  }

  putLearned(agentId: string, body: T.LearnedContent, options?: CallOptions): Promise<T.Learned> {
    return this.http.json("PUT", `/v1/agents/${segment(agentId)}/learned`, { json: body, options });
  }

  rollbackLearned(agentId: string, body: T.BodyOf<"rollback_learned"> = {}, options?: CallOptions): Promise<T.Learned> {
    return this.http.json("POST", `/v1/agents/${segment(agentId)}/learned/rollback`, { json: body, options });
  }

  getProfile(agentId: string, params?: T.QueryOf<"get_agent_profile">, options?: CallOptions): Promise<T.Profile> {
    return this.http.json("GET", `/v1/agents/${segment(agentId)}/profile`, { query: q(params), options });
  }

  putProfile(agentId: string, body: T.ProfileUpdate, options?: CallOptions): Promise<T.Profile> {
    return this.http.json("PUT", `/v1/agents/${segment(agentId)}/profile`, { json: body, options });
  }

  // --- shared memory ------------------------------------------------------------------

  /** Create or replace a JSON entry (`created` tells which); `ifMatch` makes it a
   * compare-and-set, `ifNoneMatch: "*"` creates only. */
  putSharedMemory(
    namespace: T.Namespace,
    key: string,
    value: unknown,
    params: SharedMemoryPutParams = {},
    options?: Preconditions,
  ): Promise<T.SharedMemoryEntry> {
    const { scope_id, ...rest } = params;
    const { ifMatch, ifNoneMatch, ...call } = options ?? {};
    return this.http.json("PUT", entry(namespace, key), {
      json: { value, ...rest },
      query: { scope_id },
      headers: preconditions({ ifMatch, ifNoneMatch }),
      options: call,
    });
  }

  /** Create or replace a raw entry: bytes (or text) under `content_type`, read back as a
   * `SharedMemoryBlob`. */
  putSharedMemoryBytes(
    namespace: T.Namespace,
    key: string,
    data: Uint8Array | string,
    params: SharedMemoryBytesParams = {},
    options?: Preconditions,
  ): Promise<T.SharedMemoryEntry> {
    const { ifMatch, ifNoneMatch, ...call } = options ?? {};
    const contentType =
      params.content_type ?? (typeof data === "string" ? "text/plain; charset=utf-8" : "application/octet-stream");
    return this.http.json("PUT", entry(namespace, key), {
      body: data,
      contentType,
      query: { scope_id: params.scope_id, ttl_seconds: params.ttl_seconds },
      headers: {
        ...preconditions({ ifMatch, ifNoneMatch }),
        "X-Loom-Metadata": params.metadata === undefined ? undefined : JSON.stringify(params.metadata),
      },
      options: call,
    });
  }

  /** A JSON entry with its `value`, or a raw entry's bytes (`isBlob`); 404 `NotFound`. */
  getSharedMemory(
    namespace: T.Namespace,
    key: string,
    params: { scope_id?: string | null } = {},
    options?: CallOptions,
  ): Promise<T.SharedMemoryEntry | T.SharedMemoryBlob> {
    return this.http.exchange("GET", entry(namespace, key), { query: q(params), options }, entryOrBlob);
  }

  /** A JSON entry, typed as one (its `value` needs no `isBlob` check): the common case of
   * `getSharedMemory`. A raw entry throws `LoomError` with code `not_json` (read it with
   * `getSharedMemory`); 404 `NotFound`. */
  async getSharedMemoryJson(
    namespace: T.Namespace,
    key: string,
    params: { scope_id?: string | null } = {},
    options?: CallOptions,
  ): Promise<T.SharedMemoryEntry> {
    const read = await this.getSharedMemory(namespace, key, params, options);
    if (isBlob(read)) {
      throw new LoomError(
        `the entry ${namespace}/${key} holds ${read.contentType}, not JSON: read it with getSharedMemory`,
        { status: 200, code: "not_json" },
      );
    }
    return read;
  }

  /** Like `getSharedMemory`, but null while the entry is still at `etagOrVersion` (a
   * conditional GET answered 304). */
  getSharedMemoryIfChanged(
    namespace: T.Namespace,
    key: string,
    etagOrVersion: number | string,
    params: { scope_id?: string | null } = {},
    options?: CallOptions,
  ): Promise<T.SharedMemoryEntry | T.SharedMemoryBlob | null> {
    return this.http.exchange(
      "GET",
      entry(namespace, key),
      { query: q(params), headers: { "If-None-Match": etag(etagOrVersion) }, options, accept: [304] },
      async (r) => (r.status === 304 ? null : entryOrBlob(r)),
    );
  }

  /** The entry's data reference (`ref=true`) instead of its value. */
  getSharedMemoryRef(
    namespace: T.Namespace,
    key: string,
    params: { scope_id?: string | null } = {},
    options?: CallOptions,
  ): Promise<T.DataReference> {
    return this.http.json("GET", entry(namespace, key), { query: { ...q(params), ref: true }, options });
  }

  /** Delete an entry (with `ifMatch`: only at that version, else 409 `Conflict`). */
  deleteSharedMemory(
    namespace: T.Namespace,
    key: string,
    params: { scope_id?: string | null } = {},
    options?: Preconditions,
  ): Promise<void> {
    const { ifMatch, ifNoneMatch, ...call } = options ?? {};
    return this.http.empty("DELETE", entry(namespace, key), {
      query: q(params),
      headers: preconditions({ ifMatch, ifNoneMatch }),
      options: call,
    });
  }

  /** One page of keys in key order. */
  listSharedMemoryKeys(
    namespace: T.Namespace,
    params?: T.QueryOf<"list_shared_memory_keys">,
    options?: CallOptions,
  ): Promise<T.SharedMemoryKeyList> {
    return this.http.json("GET", `/v1/shared-memory/${segment(namespace)}`, { query: q(params), options });
  }

  /** Every key (under `prefix`), following the cursors (`limit`: the page size). */
  iterSharedMemoryKeys(
    namespace: T.Namespace,
    params?: T.PageQuery<"list_shared_memory_keys">,
    options?: CallOptions,
  ): AsyncGenerator<T.SharedMemoryKey, void, undefined> {
    return paginate((cursor) => this.listSharedMemoryKeys(namespace, { ...params, cursor }, options));
  }

  /** Per namespace: live keys and bytes you can see, reads, writes, tier hits. */
  sharedMemoryStats(options?: CallOptions): Promise<T.SharedMemoryStats> {
    return this.http.json("GET", "/v1/shared-memory/stats", { options });
  }

  /** Stream puts and deletes under `prefix` as typed events (see `WatchStream`): wait for
   * the `ready` event, then every change after it arrives. `options.timeoutMs` bounds only
   * the connection; `options.signal` closes the stream. */
  watchSharedMemory(
    namespace: T.Namespace,
    params?: T.QueryOf<"watch_shared_memory">,
    options?: CallOptions,
  ): WatchStream {
    const connect = () =>
      this.http.exchange(
        "GET",
        `/v1/shared-memory/${segment(namespace)}/watch`,
        { query: q(params), headers: { Accept: "text/event-stream" }, options },
        async (r) => r,
      );
    return new WatchStream(connect, options?.signal);
  }

  /** The full data behind a `ref_...` id, with its content type. */
  getRef(refId: string, options?: CallOptions): Promise<T.SharedMemoryBlob> {
    return this.http.exchange("GET", `/v1/refs/${segment(refId)}`, { options, headers: { Accept: "*/*" } }, async (r) =>
      blobOf(r, new Uint8Array(await r.arrayBuffer())),
    );
  }

  /** The data reference itself (`meta=true`): size, checksum, content type. */
  getRefMeta(refId: string, options?: CallOptions): Promise<T.DataReference> {
    return this.http.json("GET", `/v1/refs/${segment(refId)}`, { query: { meta: true }, options });
  }

  // --- users, erasure, export / import ------------------------------------------------

  /** One page of users (agent keys: the users their agent has sessions with). */
  listUsers(params?: T.QueryOf<"list_users">, options?: CallOptions): Promise<T.UserList> {
    return this.http.json("GET", "/v1/users", { query: q(params), options });
  }

  /** Every user, following the cursors. */
  iterUsers(params?: T.PageQuery<"list_users">, options?: CallOptions): AsyncGenerator<T.User, void, undefined> {
    return paginate((cursor) => this.listUsers({ ...params, cursor }, options));
  }

  /** One user, with the size of their facts tier. */
  getUser(userId: string, options?: CallOptions): Promise<T.User> {
    return this.http.json("GET", `/v1/users/${segment(userId)}`, { options });
  }

  /** Erase everything about a user; the receipt (`status: "running"` while a worker
   * finishes a big one: `getErasure`). */
  eraseUser(userId: string, options?: CallOptions): Promise<T.Erasure> {
    return this.http.json("DELETE", `/v1/users/${segment(userId)}`, { options });
  }

  /** Erase an agent's private knowledge tier and shared-memory namespace. */
  eraseAgentMemory(agentId: string, options?: CallOptions): Promise<T.Erasure> {
    return this.http.json("DELETE", `/v1/agents/${segment(agentId)}/memory`, { options });
  }

  /** What the LLM cost the tenant: calls and tokens over a range (default: the last 30
   * days), grouped by day, purpose, model, session, user or agent, with its daily budget. */
  getUsage(params?: T.QueryOf<"get_usage">, options?: CallOptions): Promise<T.UsageReport> {
    return this.http.json("GET", "/v1/usage", { query: q(params), options });
  }

  /** A tenant's daily token budget in force and today's spending. */
  getBudget(tenantId: string, options?: CallOptions): Promise<T.Budget> {
    return this.http.json("GET", `/v1/tenants/${segment(tenantId)}/budget`, { options });
  }

  /** Set a tenant's own daily token budget (admin keys); null: no budget at all. */
  setBudget(tenantId: string, dailyTokens: number | null, options?: CallOptions): Promise<T.Budget> {
    return this.http.json("PUT", `/v1/tenants/${segment(tenantId)}/budget`, {
      json: { daily_tokens: dailyTokens },
      options,
    });
  }

  /** Drop a tenant's own budget: the server's default applies again (admin keys). */
  resetBudget(tenantId: string, options?: CallOptions): Promise<T.Budget> {
    return this.http.json("DELETE", `/v1/tenants/${segment(tenantId)}/budget`, { options });
  }

  /** An erasure's receipt. */
  getErasure(erasureId: string, options?: CallOptions): Promise<T.Erasure> {
    return this.http.json("GET", `/v1/erasures/${segment(erasureId)}`, { options });
  }

  /** The tenant's erasure receipts, newest first; with one of the ids, that subject's. */
  findErasures(params?: T.QueryOf<"find_erasures">, options?: CallOptions): Promise<T.ErasureList> {
    return this.http.json("GET", "/v1/erasures", { query: q(params), options });
  }

  private ndjson(path: string, options?: CallOptions): Promise<string> {
    return this.http.exchange("GET", path, { options, headers: { Accept: NDJSON } }, (r) => r.text());
  }

  /** Everything about a user as NDJSON text (see `importExport`). */
  exportUser(userId: string, options?: CallOptions): Promise<string> {
    return this.ndjson(`/v1/users/${segment(userId)}/export`, options);
  }

  /** One session as NDJSON text. */
  exportSession(sessionId: string, options?: CallOptions): Promise<string> {
    return this.ndjson(session(sessionId, "/export"), options);
  }

  /** The whole tenant as NDJSON text (admin keys). */
  exportTenant(options?: CallOptions): Promise<string> {
    return this.ndjson("/v1/export", options);
  }

  /** Import an export into this tenant: all or nothing, idempotent by ids. */
  importExport(data: string | Uint8Array, options?: CallOptions): Promise<T.ImportResult> {
    return this.http.json("POST", "/v1/import", { body: data, contentType: NDJSON, options });
  }

  // --- tenants, keys, identity, health ------------------------------------------------

  /** The calling key: its role, tenant and the agent it acts as. */
  me(options?: CallOptions): Promise<T.WhoAmI> {
    return this.http.json("GET", "/v1/me", { options });
  }

  /** Create a tenant (admin keys). */
  createTenant(body: T.TenantCreate, options?: CallOptions): Promise<T.Tenant> {
    return this.http.json("POST", "/v1/tenants", { json: body, options });
  }

  /** Create a key; its `secret` is in this answer only. */
  createApiKey(body: T.ApiKeyCreate, options?: CallOptions): Promise<T.ApiKeyCreated> {
    return this.http.json("POST", "/v1/api-keys", { json: body, options });
  }

  /** One page of a tenant's keys (never their secrets). */
  listApiKeys(params?: T.QueryOf<"list_api_keys">, options?: CallOptions): Promise<T.ApiKeyList> {
    return this.http.json("GET", "/v1/api-keys", { query: q(params), options });
  }

  /** Every key of the tenant, following the cursors. */
  iterApiKeys(params?: T.PageQuery<"list_api_keys">, options?: CallOptions): AsyncGenerator<T.ApiKey, void, undefined> {
    return paginate((cursor) => this.listApiKeys({ ...params, cursor }, options));
  }

  /** Revoke a key; it stops working on the next request. */
  revokeApiKey(keyId: string, params?: T.QueryOf<"revoke_api_key">, options?: CallOptions): Promise<void> {
    return this.http.empty("DELETE", `/v1/api-keys/${segment(keyId)}`, { query: q(params), options });
  }

  /** Liveness: `{ status: "ok", ... }` while the process is up. */
  healthz(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.http.json("GET", "/healthz", { options });
  }

  /** Readiness: PostgreSQL and Redis both answer (else 503 `Unavailable`, whose `details`
   * are the checks). */
  readyz(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.http.json("GET", "/readyz", { options });
  }

  /** Prometheus metrics (text exposition format). */
  metrics(options?: CallOptions): Promise<string> {
    return this.http.exchange("GET", "/metrics", { options, headers: { Accept: "text/plain" } }, (r) => r.text());
  }
}

/**
 * The methods that implement each operation of `openapi/openapi.json` (by operationId).
 * The tests fail when an operation of the API has no entry here (a new endpoint needs a
 * method); the method names are checked against the class by the compiler.
 */
export const OPERATIONS = {
  append_messages: ["appendMessages"],
  build_context: ["buildContext", "context"],
  clear_memory_items: ["clearMemoryItems"],
  clear_promoted_memory: ["clearPromoted"],
  complete_task: ["completeTask"],
  compress_memory: ["compress"],
  create_api_key: ["createApiKey"],
  create_context_package: ["createContextPackage"],
  create_memory_item: ["createMemoryItem"],
  create_session: ["createSession"],
  create_tenant: ["createTenant"],
  delete_memory_item: ["deleteMemoryItem"],
  delete_session: ["deleteSession"],
  delete_shared_memory_entry: ["deleteSharedMemory"],
  diff_contexts: ["diffContexts"],
  erase_agent_memory: ["eraseAgentMemory"],
  erase_user: ["eraseUser"],
  execute_session_tool_call: ["callTool", "executeToolCall", "executeToolCalls"],
  export_session: ["exportSession"],
  export_tenant: ["exportTenant"],
  export_user: ["exportUser"],
  extract_facts: ["extractFacts"],
  find_erasures: ["findErasures"],
  get_agent_profile: ["getProfile"],
  get_budget: ["getBudget"],
  get_context_manifest: ["getContextManifest"],
  get_data_reference: ["getRef", "getRefMeta"],
  get_erasure: ["getErasure"],
  get_fact_extraction: ["getFactExtraction"],
  get_kernel: ["getKernel"],
  get_kernel_schema: ["getKernelSchema"],
  get_learned: ["getLearned"],
  get_memory: ["getMemory"],
  get_memory_item: ["getMemoryItem"],
  get_memory_item_history: ["getMemoryItemHistory"],
  get_session: ["getSession"],
  get_shared_memory_entry: [
    "getSharedMemory",
    "getSharedMemoryJson",
    "getSharedMemoryIfChanged",
    "getSharedMemoryRef",
  ],
  get_usage: ["getUsage"],
  get_user: ["getUser"],
  healthz: ["healthz"],
  import_export: ["importExport"],
  list_api_keys: ["listApiKeys", "iterApiKeys"],
  list_contexts: ["listContexts", "iterContexts"],
  list_jobs: ["listJobs", "iterJobs"],
  list_memory_snapshots: ["listSnapshots", "iterSnapshots"],
  list_messages: ["listMessages", "iterMessages"],
  list_session_tools: ["listTools"],
  list_sessions: ["listSessions", "iterSessions"],
  list_shared_memory_keys: ["listSharedMemoryKeys", "iterSharedMemoryKeys"],
  list_users: ["listUsers", "iterUsers"],
  metrics: ["metrics"],
  patch_memory_item: ["updateMemoryItem"],
  promote_memory: ["promote"],
  promote_memory_item: ["promoteMemoryItem"],
  put_agent_profile: ["putProfile"],
  put_kernel_schema: ["putKernelSchema"],
  put_kernel_tools: ["putKernelTools"],
  put_learned: ["putLearned"],
  put_shared_memory_entry: ["putSharedMemory", "putSharedMemoryBytes"],
  query_memory_items: ["queryMemoryItems", "iterMemoryItems"],
  readyz: ["readyz"],
  replay_context: ["replayContext"],
  reset_budget: ["resetBudget"],
  revoke_api_key: ["revokeApiKey"],
  rollback_learned: ["rollbackLearned"],
  search_session: ["searchSession"],
  search_sessions: ["search"],
  set_budget: ["setBudget"],
  shared_memory_stats: ["sharedMemoryStats"],
  update_session: ["updateSession"],
  watch_shared_memory: ["watchSharedMemory"],
  who_am_i: ["me"],
} as const satisfies Partial<Record<T.OperationId, readonly (keyof LoomClient)[]>>;
