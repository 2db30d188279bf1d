// One session: the layer bar of its built context, compression state, actions, the
// message timeline (paged by seq), L2 summaries and snapshots, the rendered context.

import {api} from "./api.js";
import {h, append, clear, fmt, when, json, copyable, errorBox, table} from "./dom.js";

const PAGE = 100;
const MARGIN = 20;  // read around a page so tool_use/tool_result pairs stay together
const THRESHOLDS = [0.70, 0.80, 0.85];
// the built context's layers, in the order the context lays them out
const LAYERS = [
  ["rom", "ROM"], ["kernel", "Kernel"], ["blocks", "Knowledge"], ["facts", "Facts"],
  ["l2", "L2 summaries"], ["promoted", "Promoted"], ["recalled", "Recalled"], ["l1", "L1"],
  ["overhead", "Format overhead"],
];

const ALWAYS = new Set(["rom", "kernel", "l2", "promoted", "recalled", "l1"]);

function section(title, id, ...children) {
  return h("section", {class: "card", id}, h("h2", {}, title), ...children);
}

/** "3, 7-9" -> [3, 7, 8, 9] */
export function parseSeqs(text) {
  const out = [];
  for (const part of text.split(/[\s,]+/).filter(Boolean)) {
    const m = part.match(/^(\d+)(?:-(\d+))?$/);
    if (!m) throw new Error(`not a seq or range: ${part}`);
    const a = Number(m[1]);
    const b = m[2] ? Number(m[2]) : a;
    for (let s = a; s <= b && out.length <= 1000; s++) out.push(s);
  }
  return out;
}

function layerBar(ctx) {
  const known = new Set(LAYERS.map(([k]) => k));
  const layers = [...LAYERS, ...Object.keys(ctx.tokens).filter((k) => !known.has(k))
    .map((k) => [k, k])];
  const bar = h("div", {class: "bar", id: "layer-bar"});
  const rows = [];
  for (const [key, label] of layers) {
    if (!(key in ctx.tokens) && !ALWAYS.has(key)) continue;
    const tokens = ctx.tokens[key] ?? 0;  // recalled is absent while recall is off
    if (tokens > 0) {
      const seg = h("div", {class: `seg seg-${key}`, title: `${label}: ${fmt(tokens)} tokens`});
      seg.style.width = `${(100 * tokens) / ctx.budget}%`;  // CSSOM: allowed by the CSP
      bar.append(seg);
    }
    rows.push(h("tr", {dataset: {layer: key}},
      h("td", {}, h("span", {class: `swatch seg-${key}`}), label),
      h("td", {class: "num tokens"}, String(tokens)),
      h("td", {class: "num"}, `${((100 * tokens) / ctx.budget).toFixed(1)}%`)));
  }
  const free = Math.max(0, ctx.budget - ctx.total_tokens);
  rows.push(h("tr", {dataset: {layer: "free"}},
    h("td", {}, h("span", {class: "swatch seg-free"}), "Free"),
    h("td", {class: "num tokens"}, String(free)),
    h("td", {class: "num"}, `${((100 * free) / ctx.budget).toFixed(1)}%`)));
  for (const t of THRESHOLDS) {
    const mark = h("div", {class: "threshold", title: `${t * 100}%`}, `${t * 100}%`);
    mark.style.left = `${t * 100}%`;
    bar.append(mark);
  }
  return h("div", {},
    h("div", {class: "bar-wrap"}, bar),
    table(["layer", "tokens", "of budget"], rows, {id: "layer-table"}),
    h("p", {id: "layer-total"}, `total `, h("b", {id: "total-tokens"}, String(ctx.total_tokens)),
      ` of budget `, h("b", {id: "budget"}, String(ctx.budget)),
      ` tokens · usage ${(ctx.usage * 100).toFixed(1)}% · compress 4 at 70%, 6 at 80%, `
      + `evict 8 at 85%`));
}

function compressionState(ctx, memory) {
  const job = memory.compression;
  const c = ctx.compression;
  const items = [
    ["usage", `${(memory.usage * 100).toFixed(1)}% (${fmt(memory.tokens.total)} of `
      + `${fmt(memory.budget)})`],
    ["compression due", memory.compression_due ? "yes" : "no"],
    ["pending triggers", (memory.pending_triggers || []).join(", ") || "none"],
    ["job", job ? `${job.status} (attempts ${job.attempts}, runs ${job.runs}, `
      + `summaries ${job.summaries_written}, tokens saved ${fmt(job.tokens_saved)})` : "none yet"],
    ["job error", job?.last_error || "–"],
    ["pending in this build", c.pending ? `yes: stand-ins for ${
      c.stand_in_ranges.map((r) => r.join("-")).join(", ")}` : "no"],
    ["triggers in this build", (c.triggers || []).join(", ") || "none"],
    ["omitted / truncated", `${c.omitted_seqs.length} / ${c.truncated_seqs.length} messages`],
    ["snapshots in swap", fmt(memory.snapshot_count)],
  ];
  return h("dl", {class: "kv", id: "compression"},
    items.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/**
 * Where a message is in the built context (what the model sees): L1, promoted, recalled, in an L2
 * summary (or a stand-in while its compression is pending), archived in a snapshot, or
 * only in the swap. From the raw build, so a long uncompressed backlog costs nothing here.
 */
function placer(ctx, snapshots) {
  const l1 = new Set(ctx.l1_seqs);
  const promoted = new Set((ctx.layers?.promoted || []).map((m) => m.seq));
  const recalled = new Set((ctx.layers?.recalled?.messages || []).map((m) => m.seq));
  const l2 = ctx.layers?.l2 || [];
  return (seq) => {
    if (l1.has(seq)) return "L1";
    if (promoted.has(seq)) return "promoted";
    if (recalled.has(seq)) return "recalled";
    const summary = l2.find((s) => s.start_seq <= seq && seq <= s.end_seq);
    if (summary) return summary.stand_in ? "L2 stand-in" : "L2";
    if (snapshots.some((s) => s.start_seq <= seq && seq <= s.end_seq)) return "swap (snapshot)";
    return "swap";
  };
}

function content(value) {
  if (typeof value === "string") return h("div", {class: "text"}, value);
  if (!Array.isArray(value)) return h("pre", {class: "code"}, json(value));
  return value.map((b) => b && b.type === "text"
    ? h("div", {class: "text"}, b.text)
    : h("pre", {class: "code"}, json(b)));
}

function messageRow(m, place, focus) {
  const cls = `msg role-${m.role} place-${place.split(" ")[0].replace(/[()]/g, "")}`
    + (m.seq === focus ? " focus" : "");
  return h("div", {class: cls, id: `msg-${m.seq}`, dataset: {seq: m.seq, place}},
    h("div", {class: "msg-head"},
      h("span", {class: "seq"}, `#${m.seq}`),
      h("span", {class: "role"}, m.role),
      h("span", {class: "badge place"}, place),
      h("span", {class: "muted"}, `${m.token_count} tokens · ${when(m.created_at)}`),
      m.is_error ? h("span", {class: "badge err"}, "error") : null),
    content(m.content),
    (m.tool_calls || []).map((c) => h("div", {class: "tool-use"},
      h("b", {}, `tool_use ${c.name}`), ` id ${c.id}`, h("pre", {class: "code"}, json(c.input)))),
    m.tool_use_id ? h("div", {class: "muted small"}, `tool_result for ${m.tool_use_id}`) : null);
}

/** Messages with tool_calls grouped with the tool results that answer them. */
function groupTools(messages) {
  const groups = [];
  for (const m of messages) {
    const last = groups.at(-1);
    if (m.role === "tool" && last && last.calls.has(m.tool_use_id)) {
      last.items.push(m);
    } else {
      groups.push({items: [m], calls: new Set((m.tool_calls || []).map((c) => c.id))});
    }
  }
  return groups;
}

async function timeline(box, sid, total, place, focus, signal) {
  const start = focus ? Math.max(1, focus - PAGE / 2) : Math.max(1, total - PAGE + 1);
  const status = h("span", {class: "muted", id: "timeline-range"});
  const list = h("div", {class: "timeline", id: "timeline"});
  const failed = (err) => {
    if (err.name !== "AbortError") list.replaceChildren(errorBox(err));
  };
  const nav = (label, id, seq) => h("button", {type: "button", id, class: "small",
    onclick: () => load(seq).catch(failed)}, label);
  const goto = h("input", {type: "number", min: 1, max: total, id: "goto-seq", size: 6});
  const controls = h("div", {class: "pager"});
  clear(box).append(controls, list);

  async function load(first) {
    first = Math.min(Math.max(1, first), Math.max(1, total - PAGE + 1));
    const after = Math.max(0, first - 1 - MARGIN);
    const got = await api("GET", `/v1/sessions/${sid}/messages`,
                          {query: {after_seq: after, limit: PAGE + 2 * MARGIN}, signal});
    const items = got.items;
    let a = items.findIndex((m) => m.seq >= first);
    if (a < 0) a = items.length;
    while (a > 0 && items[a].role === "tool") a--;  // keep a result with its call
    let b = items.findIndex((m) => m.seq >= first + PAGE);
    if (b < 0) b = items.length;
    while (b < items.length && items[b].role === "tool") b++;
    const shown = items.slice(a, b);
    const frag = document.createDocumentFragment();
    for (const g of groupTools(shown)) {
      const rows = g.items.map((m) => messageRow(m, place(m.seq), focus));
      frag.append(g.calls.size ? h("div", {class: "tool-group"}, h("div", {class: "muted small"},
        "tool_use and its results"), rows) : rows[0]);
    }
    list.replaceChildren(frag);
    const lo = shown.length ? shown[0].seq : 0;
    const hi = shown.length ? shown.at(-1).seq : 0;
    status.textContent = `messages ${fmt(lo)}–${fmt(hi)} of ${fmt(total)}`;
    clear(controls).append(
      nav("⇤ First", "first-page", 1), nav("← Older", "older", lo - PAGE),
      status, nav("Newer →", "newer", hi + 1), nav("Last ⇥", "last-page", total),
      h("form", {class: "inline", onsubmit: (ev) => {
        ev.preventDefault();
        focus = Number(goto.value);
        load(focus - PAGE / 2).then(() => scrollToFocus(), failed);
      }}, h("label", {for: "goto-seq"}, "go to seq"), goto));
  }

  function scrollToFocus() {
    const el = focus && document.getElementById(`msg-${focus}`);
    if (el) el.scrollIntoView({block: "center"});
  }

  await load(start);
  scrollToFocus();
}

async function allSnapshots(sid, signal) {
  const out = [];
  let cursor;
  for (let i = 0; i < 20; i++) {  // at most 2,000 snapshots listed
    const page = await api("GET", `/v1/sessions/${sid}/memory/snapshots`,
                           {query: {limit: 100, cursor}, signal});
    out.push(...page.items);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return out;
}

function summaries(memory, snapshots) {
  const l2 = memory.l2.map((s) => h("tr", {},
    h("td", {class: "mono"}, `${s.start_seq}–${s.end_seq}`), h("td", {}, s.method),
    h("td", {class: "num"}, fmt(s.token_count)), h("td", {}, h("div", {class: "text"}, s.text))));
  const snaps = snapshots.map((s) => h("tr", {},
    h("td", {class: "mono"}, `${s.start_seq}–${s.end_seq}`),
    h("td", {}, `${s.summary_count} summaries · ${when(s.created_at)}`),
    h("td", {class: "num"}, fmt(s.token_count)),
    h("td", {}, h("details", {}, h("summary", {}, "content"), h("div", {class: "text"},
                                                               s.content)))));
  return [
    h("h3", {}, `L2 summaries (${memory.l2.length})`),
    table(["seqs", "method", "tokens", "text"], l2, {id: "l2-table"}),
    h("h3", {}, `Snapshots in swap (${snapshots.length})`),
    table(["seqs", "made", "tokens", "content"], snaps, {id: "snapshot-table"}),
  ];
}

function rendered(sid, signal) {
  const out = h("div", {id: "rendered"});
  let current = "anthropic";
  let shown = 0;  // the latest request wins, whatever order the answers come in
  const show = async (format = current) => {
    current = format;
    const mine = ++shown;
    for (const b of tabs.querySelectorAll("button")) {
      b.classList.toggle("active", b.dataset.format === format);
    }
    let node;
    try {
      // the console's own builds are not recorded in the session's context history
      const ctx = await api("POST", `/v1/sessions/${sid}/context`,
                            {body: {format, record: false}, signal});
      node = copyable(json(ctx), {id: "rendered-json"});
    } catch (err) {
      node = errorBox(err);
    }
    if (mine === shown) clear(out).append(node);
  };
  const tabs = h("div", {class: "tabs"}, ["anthropic", "openai", "raw"].map((f) =>
    h("button", {type: "button", class: "small", dataset: {format: f}, id: `format-${f}`,
                 onclick: () => show(f)}, f)));
  return {node: h("div", {}, tabs, out), show};
}

function actions(sid, refresh, signal) {
  const status = h("div", {id: "action-status"});
  const seqs = h("input", {type: "text", id: "promote-seqs", size: 20, placeholder: "3, 7-9"});
  const run = async (fn) => {
    clear(status).append("working…");
    try {
      clear(status).append(await fn());
      await refresh();
    } catch (err) {
      clear(status).append(errorBox(err));
    }
  };
  const clearButton = h("button", {type: "button", id: "clear-promoted",
                                   onclick: () => run(async () => {
    const r = await api("DELETE", `/v1/sessions/${sid}/memory/promoted`, {signal});
    return `cleared ${r.cleared} promoted messages`;
  })}, "Clear promoted");
  const node = h("div", {class: "actions"},
    h("button", {type: "button", id: "compress", onclick: () => run(async () => {
      const r = await api("POST", `/v1/sessions/${sid}/memory/compress`,
                          {query: {wait: "true"}, signal});
      return `compressed: ${r.summaries_written} summaries written`;
    })}, "Compress now"),
    h("form", {class: "inline", onsubmit: (ev) => {
      ev.preventDefault();
      run(async () => {
        const r = await api("POST", `/v1/sessions/${sid}/memory/promote`,
                            {body: {seqs: parseSeqs(seqs.value)}, signal});
        const skipped = r.skipped.map((s) => `${s.seq}: ${s.reason}`).join("; ");
        const added = r.added.join(", ") || "nothing";
        return `promoted ${added}${skipped ? ` (skipped ${skipped})` : ""}`;
      });
    }}, h("label", {for: "promote-seqs"}, "promote seqs"), seqs,
      h("button", {type: "submit", id: "promote"}, "Promote")),
    clearButton,
    h("a", {href: `#/search?session=${encodeURIComponent(sid)}`}, "Search this session"),
    status);
  return {node, update: (memory) => { clearButton.disabled = !memory.promoted_seqs.length; }};
}

export async function sessionPage(view, {args, query, signal}) {
  const sid = encodeURIComponent(args[0] || "");
  const focus = query.seq ? Number(query.seq) : null;
  const head = h("div", {});
  const layers = section("Context layers", "layers");
  const state = section("Compression", "compression-state");
  const act = section("Actions", "actions");
  const acts = actions(sid, () => refresh(), signal);
  act.append(acts.node);
  const timelineBox = h("div", {}, h("p", {class: "muted"}, "Loading messages…"));
  const messages = section("Messages", "messages", timelineBox);
  const l2 = section("L2 and snapshots", "summaries");
  const render = rendered(sid, signal);
  const ctxSection = section("Rendered context", "context", render.node);
  view.append(head, layers, act, state, messages, l2, ctxSection);

  async function refresh() {
    // the timeline needs only the build and the snapshots; the stored memory state (slow on
    // a long uncompressed backlog: it lists every L1 seq) is read once the timeline is drawn
    const [session, ctx, snapshots] = await Promise.all([
      api("GET", `/v1/sessions/${sid}`, {signal}),
      api("POST", `/v1/sessions/${sid}/context`, {body: {format: "raw", record: false},
                                                  signal}),
      allSnapshots(sid, signal),
    ]);
    // dom's append skips what is absent (the DOM's own would print "null")
    append(clear(head), [
      h("h1", {}, "Session ", h("span", {class: "mono", id: "session-id"}, session.id)),
      h("p", {}, `agent `, h("b", {id: "session-agent"}, session.agent_id),
        session.user_id ? [` · user `, h("a", {href: `#/user/${encodeURIComponent(
          session.user_id)}`, class: "mono", id: "session-user"}, session.user_id)] : null,
        ` · ${fmt(session.message_count)} messages · ${fmt(session.message_tokens)} tokens · `
        + `last activity ${when(session.updated_at)} · `,
        h("a", {href: `#/contexts/${sid}`, id: "context-history"}, "Context history")),
      session.metadata && Object.keys(session.metadata).length
        ? h("pre", {class: "code small", id: "session-metadata"}, json(session.metadata))
        : null]);
    clear(layers).append(h("h2", {}, "Context layers"), layerBar(ctx));
    await timeline(timelineBox, sid, session.message_count, placer(ctx, snapshots), focus,
                   signal);
    render.show();
    const memory = await api("GET", `/v1/sessions/${sid}/memory`, {signal});
    clear(state).append(h("h2", {}, "Compression"), compressionState(ctx, memory));
    acts.update(memory);
    clear(l2).append(h("h2", {}, "L2 and snapshots"), ...summaries(memory, snapshots));
  }
  await refresh();
}
