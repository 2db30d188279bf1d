// Search the swap: one session, the agent's sessions or the tenant's, with scores and the
// matching words highlighted; a hit opens its place in the session.

import {api, auth} from "./api.js";
import {h, clear, fmt, when, errorBox} from "./dom.js";

/** Text with the words that start with a searched (stemmed) lexeme in <mark>. */
export function highlight(text, lexemes) {
  const parts = String(text).split(/([\p{L}\p{N}_]+)/u);
  return parts.map((part, i) => {
    const lower = part.toLowerCase();
    return i % 2 === 1 && lexemes.some((l) => l && lower.startsWith(l))
      ? h("mark", {}, part) : part;
  });
}

function messageText(m) {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) {
    return m.content.map((b) => (b && b.type === "text" ? b.text : JSON.stringify(b))).join("\n");
  }
  return JSON.stringify(m.content);
}

export async function searchPage(view, {query: q, signal}) {
  const ctx = auth.ctx;
  const text = h("input", {type: "search", id: "search-query", size: 40, value: q.q || "",
                           required: true, placeholder: "what was said about…"});
  // by default: the named session, else the agent's sessions when there is an agent (an
  // agent key's own, or the one a service or admin key acts as), else the tenant's
  const named = q.agent || (ctx.role === "agent" ? "" : ctx.agent || "");
  const initial = q.scope || (q.session ? "session"
    : ctx.role === "agent" || named ? "agent" : "tenant");
  const scope = h("select", {id: "search-scope"},
    h("option", {value: "session", selected: initial === "session"}, "one session"),
    h("option", {value: "agent", selected: initial === "agent"}, "the agent's sessions"),
    ctx.role === "agent" ? null
      : h("option", {value: "tenant", selected: initial === "tenant"}, "the tenant's sessions"));
  const session = h("input", {type: "text", id: "search-session", size: 36,
                              value: q.session || "", placeholder: "session id"});
  const agent = h("input", {type: "text", id: "search-agent", size: 16,
                            value: q.agent || (ctx.role === "agent" ? "" : ctx.agent || ""),
                            placeholder: "agent id", disabled: ctx.role === "agent"});
  const ranking = h("select", {id: "search-ranking"},
    h("option", {value: "conversation"}, "conversation-aware"),
    h("option", {value: "message", selected: q.ranking === "message"}, "plain BM25"));
  const results = h("div", {id: "search-results"});
  view.append(h("h1", {}, "Search"),
    h("form", {class: "filters", id: "search-form", onsubmit: (ev) => {
      ev.preventDefault();
      const params = new URLSearchParams({q: text.value, scope: scope.value,
        session: session.value.trim(), agent: agent.value.trim(), ranking: ranking.value});
      for (const [k, v] of [...params]) if (!v) params.delete(k);
      location.hash = `#/search?${params}`;
    }},
      text, scope, session, agent, ranking, h("button", {type: "submit"}, "Search")),
    results);
  if (!q.q) return;

  const chosen = scope.value;
  const body = {query: q.q, limit: 20, ranking: ranking.value};
  let path = "/v1/search";
  if (chosen === "session") {
    if (!q.session) {
      results.append(errorBox("Name the session to search."));
      return;
    }
    path = `/v1/sessions/${encodeURIComponent(q.session)}/search`;
  } else {
    body.scope = chosen;
    if (chosen === "agent" && q.agent) body.agent_id = q.agent;
    if (chosen === "agent" && ctx.role !== "agent" && !q.agent && !ctx.agent) {
      results.append(errorBox("Name the agent whose sessions to search, or search the "
                              + "tenant's sessions."));
      return;
    }
  }
  let found;
  try {
    found = await api("POST", path, {body, signal});
  } catch (err) {
    if (err.name === "AbortError") throw err;
    results.append(errorBox(err));
    return;
  }
  const lexemes = found.query_lexemes || [];
  clear(results).append(h("p", {class: "muted", id: "search-summary"},
    `${found.results.length} results of ${found.candidates} candidates · terms `
    + `${lexemes.join(", ") || "none"} · `
    + (found.reranked ? "reranked by the LLM" : "BM25 order")));
  for (const hit of found.results) {
    const m = hit.message;
    const href = `#/session/${encodeURIComponent(hit.session_id)}?seq=${hit.seq}`;
    results.append(h("div", {class: "hit card", dataset: {seq: hit.seq, session: hit.session_id}},
      h("div", {class: "msg-head"},
        h("a", {href, class: "hit-link"}, `session ${hit.session_id.slice(0, 8)} · #${hit.seq}`),
        h("span", {class: "role"}, m.role),
        h("span", {class: "badge score"}, `BM25 ${hit.bm25_score.toFixed(3)}`),
        hit.rerank_score !== null && hit.rerank_score !== undefined
          ? h("span", {class: "badge"}, `rerank ${fmt(hit.rerank_score)}`) : null,
        h("span", {class: "muted"}, when(m.created_at))),
      h("div", {class: "text"}, highlight(messageText(m), lexemes))));
  }
}
