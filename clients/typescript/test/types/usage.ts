// Compiled, not run (`npm run test:types`): what a consumer writes type-checks against the
// built .d.ts, and what the API refuses does not (each @ts-expect-error must be an error).
import { LoomClient, NotFound, type Session, type QueryOf, type WatchEvent } from "../../dist/index.js";
const loom = new LoomClient({ apiKey: "k" });
async function main() {
  const s: Session = await loom.createSession({ user_id: "u", config: { l1_max_messages: 4 } });
  const page = await loom.listSessions({ user_id: "u", limit: 2 });
  const c: string | null | undefined = page.next_cursor;
  // @ts-expect-error unknown query parameter
  await loom.listSessions({ nope: 1 });
  const ctx = await loom.context(s.id);
  const sys: unknown = ctx.system;
  const o = await loom.context(s.id, "openai");
  // @ts-expect-error no system in the openai params
  o.system;
  const w = loom.watchSharedMemory("global", { prefix: "x/" });
  for await (const e of w) {
    const any: WatchEvent = e;
    void any;
    if (e.event === "put") { const k: string = e.key; const v: number | null = e.version; }
    if (e.event === "unknown") { const n: string = e.name; }
  }
  const q: QueryOf<"query_memory_items"> = { as_of: "2026-01-01T00:00:00Z", include_invalidated: true };
  const items = await loom.queryMemoryItems({ filters: { scope: "global" }, order_by: "-importance", limit: 3 }, q);
  const first = items.items[0];
  if (first) await loom.updateMemoryItem(first.id, first.version ?? 1, { text: "x" });
  // @ts-expect-error role must be one of the API's
  await loom.appendMessages(s.id, [{ role: "wizard", content: "x" }]);
  try { await loom.getSession("x"); } catch (e) { if (e instanceof NotFound) { const code: string = e.code; } }
  const m = await loom.appendMessages(s.id, [{ role: "user", content: "hi" }], { idempotencyKey: "k" });
  const r: boolean | undefined = m.replayed;
  // a JSON entry's value in one call; the union getSharedMemory returns needs isBlob first
  const plan: unknown = (await loom.getSharedMemoryJson("global", "plan")).value;
  const either = await loom.getSharedMemory("global", "plan");
  // @ts-expect-error a SharedMemoryBlob has no value
  either.value;
  void [c, sys, r, plan];
}
void main;
