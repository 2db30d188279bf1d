// Sessions: a cursor-paged list with agent, message count, tokens per layer, last activity.

import {api, auth} from "./api.js";
import {h, clear, fmt, when, table, errorBox} from "./dom.js";

const PAGE = 25;
const LAYERS = ["rom", "kernel", "l2", "promoted", "l1"];

/** "project=apollo, kind=long" -> [["project", "apollo"], ["kind", "long"]] */
function parseMeta(text) {
  return text.split(",").map((p) => p.trim()).filter(Boolean).map((p) => {
    const i = p.indexOf("=");
    return i < 0 ? [p, null] : [p.slice(0, i).trim(), p.slice(i + 1).trim()];
  });
}

function metaMatches(metadata, pairs) {
  return pairs.every(([k, v]) => k in (metadata || {})
    && (v === null || String(metadata[k]) === v || JSON.stringify(metadata[k]) === v));
}

/** Run fn over items, `width` at a time. */
async function pool(items, width, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({length: Math.min(width, items.length)}, worker));
}

export async function sessionsPage(view, {query, signal}) {
  const ctx = auth.ctx;
  const agent = query.agent ?? (ctx.role === "agent" ? "" : ctx.agent || "");
  const meta = query.meta || "";
  const cursor = query.cursor || "";
  const back = query.back ? query.back.split("~") : [];

  const agentInput = h("input", {type: "text", id: "filter-agent", value: agent, size: 16,
                                 placeholder: "any agent", disabled: ctx.role === "agent"});
  const metaInput = h("input", {type: "text", id: "filter-meta", value: meta, size: 30,
                                placeholder: "key=value, key"});
  const go = (changes) => {
    const q = new URLSearchParams({agent: agentInput.value.trim(), meta: metaInput.value.trim(),
                                   ...changes});
    for (const [k, v] of [...q]) if (!v) q.delete(k);
    location.hash = `#/sessions?${q}`;
  };
  view.append(
    h("h1", {}, "Sessions"),
    h("form", {class: "filters", id: "sessions-filter", onsubmit: (ev) => {
      ev.preventDefault();
      go({});
    }},
      h("label", {for: "filter-agent"}, "agent"), agentInput,
      h("label", {for: "filter-meta"}, "metadata"), metaInput,
      h("button", {type: "submit"}, "Filter")),
    h("p", {class: "muted small"}, "The metadata filter applies to the sessions of this page "
      + "(the API lists sessions by agent only)."));

  const page = await api("GET", "/v1/sessions", {
    query: {agent_id: ctx.role === "agent" ? undefined : agent || undefined, limit: PAGE,
            cursor: cursor || undefined}, signal});
  const pairs = parseMeta(meta);
  const shown = page.items.filter((s) => metaMatches(s.metadata, pairs));
  const rows = shown.map((s) => {
    const layerCells = LAYERS.map((l) => h("td", {class: "num", dataset: {layer: l}}, "…"));
    const tr = h("tr", {dataset: {session: s.id}},
      h("td", {}, h("a", {href: `#/session/${encodeURIComponent(s.id)}`, class: "mono"},
                    s.id.slice(0, 8))),
      h("td", {class: "agent"}, s.agent_id),
      h("td", {class: "user"}, s.user_id ? h("a", {href: `#/user/${encodeURIComponent(
        s.user_id)}`, class: "mono"}, s.user_id) : ""),
      h("td", {class: "num count"}, fmt(s.message_count)),
      layerCells,
      h("td", {class: "num"}, `${fmt(s.message_tokens)}`),
      h("td", {}, when(s.updated_at)),
      h("td", {class: "meta mono"}, Object.keys(s.metadata || {}).length
        ? JSON.stringify(s.metadata) : ""));
    tr.layerCells = layerCells;
    return tr;
  });
  view.append(table(["session", "agent", "user", "messages", "ROM", "Kernel", "L2", "promoted", "L1",
                     "all messages (tokens)", "last activity", "metadata"], rows,
                    {id: "sessions-table", class: "wide"}));
  if (!shown.length) view.append(h("p", {class: "muted", id: "sessions-empty"}, "No sessions."));

  const pager = h("div", {class: "pager"});
  if (cursor) {
    pager.append(h("button", {type: "button", id: "prev-page", onclick: () => go({
      cursor: back.at(-1) || "", back: back.slice(0, -1).join("~")})}, "← Previous"));
  }
  if (page.next_cursor) {
    pager.append(h("button", {type: "button", id: "next-page", onclick: () => go({
      cursor: page.next_cursor, back: [...back, cursor].join("~")})}, "Next →"));
  }
  view.append(pager);

  // the list carries each session's tokens per layer (GET /v1/sessions)
  for (const tr of rows) {
    const one = shown.find((s) => s.id === tr.dataset.session);
    tr.layerCells.forEach((td, i) => { td.textContent = fmt(one?.memory?.[LAYERS[i]] ?? 0); });
  }
}

export {pool};
