/**
 * A shared-memory watch (`GET /v1/shared-memory/{namespace}/watch`, Server-Sent Events) as
 * an async iterator of typed events. Reads the body with `ReadableStream` and
 * `TextDecoder`: no EventSource (which cannot send an Authorization header).
 */

/** First event of every stream: the subscription is in place (changes from now on are sent). */
export interface ReadyEvent {
  event: "ready";
  at: string;
}

/** Sent when the stream has been quiet for `heartbeat_seconds`. */
export interface HeartbeatEvent {
  event: "heartbeat";
  at: string;
}

interface EntryEventBase {
  /** The SSE event id: the entry's version. */
  id?: string;
  op: string;
  namespace: string;
  scope_id: string | null;
  key: string;
  version: number | null;
  etag: string | null;
  at: string | null;
  /** True for the current entries sent first with `include_initial`. */
  initial: boolean;
}

export interface PutEvent extends EntryEventBase {
  event: "put";
  size_bytes?: number | null;
  content_type?: string | null;
  checksum?: string | null;
  writer_agent_id?: string | null;
  /** Small JSON values come inline; otherwise read the entry. */
  value?: unknown;
}

export interface DeleteEvent extends EntryEventBase {
  event: "delete";
  /** `expired` when a TTL ran out. */
  reason?: string | null;
}

/** Final event: the watcher fell behind and its backlog was discarded; re-read and watch again. */
export interface DroppedEvent {
  event: "dropped";
  reason: string | null;
  missed: number;
}

/** Final event: the server closed the stream (e.g. shutting down). */
export interface ClosedEvent {
  event: "closed";
  reason: string | null;
  missed: number;
}

/** An event this client version does not know (from a newer server). */
export interface UnknownEvent {
  event: "unknown";
  /** The SSE event name. */
  name: string;
  id?: string;
  data: unknown;
}

export type WatchEvent = ReadyEvent | HeartbeatEvent | PutEvent | DeleteEvent | DroppedEvent | ClosedEvent | UnknownEvent;

const KNOWN = new Set(["ready", "heartbeat", "put", "delete", "dropped", "closed"]);
const FINAL = new Set(["dropped", "closed"]);

/** Turns the lines of a `text/event-stream` into typed events (one per blank line). */
export class SSEParser {
  private name = "";
  private data: string[] = [];
  private id: string | undefined;
  private buffer = "";

  /** Feed decoded text (any chunking); returns the events it completed. */
  push(text: string): WatchEvent[] {
    this.buffer += text;
    const events: WatchEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      // a lone \r at the end may be the first half of \r\n: wait for more
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  /** Take one line (without its end of line); return an event when one is complete. */
  line(line: string): WatchEvent | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined; // a comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value || undefined;
    return undefined;
  }

  private dispatch(): WatchEvent | undefined {
    const name = this.name || "message";
    const data = this.data;
    const id = this.id;
    this.name = "";
    this.data = [];
    this.id = undefined;
    if (data.length === 0) return undefined;
    const raw = data.join("\n");
    let payload: unknown;
    try {
      payload = JSON.parse(raw);
    } catch {
      payload = raw;
    }
    if (!KNOWN.has(name) || payload === null || typeof payload !== "object" || Array.isArray(payload)) {
      return id === undefined ? { event: "unknown", name, data: payload } : { event: "unknown", name, id, data: payload };
    }
    const event: Record<string, unknown> = { event: name, ...(payload as Record<string, unknown>) };
    event["event"] = name;
    if ((name === "put" || name === "delete") && id !== undefined) event["id"] = id;
    if (name === "put" || name === "delete") event["initial"] = Boolean(event["initial"]);
    if (FINAL.has(name)) {
      event["reason"] = event["reason"] ?? null;
      event["missed"] = typeof event["missed"] === "number" ? event["missed"] : 0;
    }
    return event as unknown as WatchEvent;
  }
}

/**
 * The events of one watch, in order: `ready`, the initial entries (`include_initial`), then
 * `put` / `delete` as they happen, `heartbeat`s, and a final `dropped` or `closed` event
 * when the server ends the stream (the iteration ends after it).
 *
 * ```ts
 * const watch = loom.watchSharedMemory("swarm", { scope_id: "s-1", prefix: "tasks/" });
 * for await (const event of watch) {
 *   if (event.event === "put") console.log(event.key, event.value);
 * }
 * ```
 * Leaving the loop (`break`, `return`, a throw) or `close()` closes the connection. The
 * connection opens on `open()` or on the first read; errors such as 404 are thrown there.
 */
export class WatchStream implements AsyncIterableIterator<WatchEvent> {
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private opening: Promise<void> | undefined;
  private readonly parser = new SSEParser();
  private readonly decoder = new TextDecoder();
  private readonly pending: WatchEvent[] = [];
  private finished = false;

  constructor(
    private readonly connect: () => Promise<Response>,
    private readonly signal?: AbortSignal,
  ) {
    signal?.addEventListener("abort", () => void this.close(), { once: true });
  }

  /** Connect (once); throws the typed error when the server refuses the watch. */
  open(): Promise<void> {
    this.opening ??= (async () => {
      const response = await this.connect();
      if (!response.body) throw new TypeError("the watch answer has no body");
      this.reader = response.body.getReader();
      if (this.finished) await this.close();
    })();
    return this.opening;
  }

  async next(): Promise<IteratorResult<WatchEvent>> {
    if (this.finished && !this.opening && this.pending.length === 0) return { value: undefined, done: true };
    await this.open();
    for (;;) {
      const queued = this.pending.shift();
      if (queued) {
        if (FINAL.has(queued.event)) await this.close();
        return { value: queued, done: false };
      }
      if (this.finished || !this.reader) return { value: undefined, done: true };
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await this.reader.read();
      } catch (error) {
        if (this.finished) return { value: undefined, done: true };
        await this.close();
        throw error;
      }
      if (chunk.done) {
        this.pending.push(...this.parser.push(this.decoder.decode() + "\n\n"));
        await this.close();
        const last = this.pending.shift();
        return last ? { value: last, done: false } : { value: undefined, done: true };
      }
      this.pending.push(...this.parser.push(this.decoder.decode(chunk.value, { stream: true })));
    }
  }

  /** Close the connection; the iteration ends. */
  async close(): Promise<void> {
    if (this.finished && !this.reader) return;
    this.finished = true;
    const reader = this.reader;
    this.reader = undefined;
    if (reader) await reader.cancel().catch(() => undefined);
  }

  async return(): Promise<IteratorResult<WatchEvent>> {
    await this.close();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): WatchStream {
    return this;
  }
}
