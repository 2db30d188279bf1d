// Users (issue 28): the people sessions are with. A cursor-paged list, and one user's page:
// their sessions, the facts of their `user/<id>` tier, an export, and erasure behind a
// confirmation that asks for the user id to be typed again.

import {api, auth} from "./api.js";
import {h, clear, fmt, when, table, errorBox} from "./dom.js";

const PAGE = 25;

export async function usersPage(view, {query, signal}) {
  const cursor = query.cursor || "";
  const back = query.back ? query.back.split("~") : [];
  const go = (changes) => {
    const q = new URLSearchParams(changes);
    for (const [k, v] of [...q]) if (!v) q.delete(k);
    location.hash = `#/users?${q}`;
  };
  const find = h("input", {type: "text", id: "user-id", size: 30, placeholder: "user id"});
  view.append(
    h("h1", {}, "Users"),
    h("form", {class: "filters", id: "user-open", onsubmit: (ev) => {
      ev.preventDefault();
      if (find.value.trim()) location.hash = `#/user/${encodeURIComponent(find.value.trim())}`;
    }}, h("label", {for: "user-id"}, "open"), find, h("button", {type: "submit"}, "Open")));
  const page = await api("GET", "/v1/users", {query: {limit: PAGE, cursor: cursor || undefined},
                                              signal});
  const rows = page.items.map((u) => h("tr", {dataset: {user: u.id}},
    h("td", {}, h("a", {href: `#/user/${encodeURIComponent(u.id)}`, class: "mono"}, u.id)),
    h("td", {class: "num"}, fmt(u.session_count)),
    h("td", {class: "num"}, fmt(u.message_count)),
    h("td", {}, when(u.first_seen)),
    h("td", {}, when(u.last_activity))));
  view.append(table(["user", "sessions", "messages", "first seen", "last activity"], rows,
                    {id: "users-table", class: "wide"}));
  if (!rows.length) view.append(h("p", {class: "muted", id: "users-empty"}, "No users."));
  const pager = h("div", {class: "pager"});
  if (cursor) {
    pager.append(h("button", {type: "button", id: "users-prev", onclick: () => go({
      cursor: back.at(-1) || "", back: back.slice(0, -1).join("~")})}, "← Previous"));
  }
  if (page.next_cursor) {
    pager.append(h("button", {type: "button", id: "users-next", onclick: () => go({
      cursor: page.next_cursor, back: [...back, cursor].join("~")})}, "Next →"));
  }
  view.append(pager);
}

function receiptView(r) {
  const counts = Object.entries(r.counts).filter(([, n]) => n)
    .map(([k, n]) => h("tr", {}, h("td", {}, k), h("td", {class: "num"}, fmt(n))));
  return h("div", {class: "card", id: "erasure-receipt"},
    h("h2", {}, `Erasure ${r.status}`),
    h("p", {class: "mono small"}, r.erasure_id),
    h("p", {}, `started ${when(r.started_at)}`, r.finished_at ? `, finished ${when(r.finished_at)}`
      : ""),
    table(["kind of data", "rows deleted"], counts, {id: "erasure-counts"}));
}

export async function userPage(view, {args, signal}) {
  const id = args[0] || "";
  const user = await api("GET", `/v1/users/${encodeURIComponent(id)}`, {signal});
  view.append(h("h1", {}, "User ", h("span", {class: "mono", id: "user-title"}, user.id)),
    h("p", {id: "user-summary"}, `${fmt(user.session_count)} sessions, `
      + `${fmt(user.message_count)} messages, ${fmt(user.fact_count ?? 0)} facts; `
      + `last activity ${when(user.last_activity)}`));

  const sessions = await api("GET", "/v1/sessions", {query: {user_id: id, limit: 200}, signal});
  view.append(h("h2", {}, "Sessions"), table(["session", "agent", "messages", "last activity"],
    sessions.items.map((s) => h("tr", {dataset: {session: s.id}},
      h("td", {}, h("a", {href: `#/session/${encodeURIComponent(s.id)}`, class: "mono"},
                    s.id.slice(0, 8))),
      h("td", {}, s.agent_id), h("td", {class: "num"}, fmt(s.message_count)),
      h("td", {}, when(s.updated_at)))), {id: "user-sessions"}));

  const facts = await api("POST", "/v1/memory-items/query", {
    body: {filters: {scope: `user/${id}`}, order_by: "timestamp", limit: 200},
    query: {include_invalidated: "true"}, signal});
  view.append(h("h2", {}, "Facts"), table(["fact", "kind", "since", "until"],
    facts.items.map((f) => h("tr", {dataset: {item: f.id}, class: f.invalid_at ? "muted" : ""},
      h("td", {}, f.text ?? JSON.stringify(f.payload)), h("td", {}, f.kind),
      h("td", {}, when(f.valid_from || f.created_at)), h("td", {}, when(f.invalid_at))
    )), {id: "user-facts"}));

  const status = h("div", {id: "erase-status"});
  const exportStatus = h("span", {id: "export-status", class: "muted small"});
  const actions = h("div", {class: "card", id: "user-actions"},
    h("h2", {}, "Portability and erasure"),
    h("button", {type: "button", id: "user-export", onclick: async () => {
      clear(exportStatus).append("Exporting…");
      try {
        const text = await api("GET", `/v1/users/${encodeURIComponent(id)}/export`);
        const link = h("a", {id: "export-link", download: `user-${id}.ndjson`,
          href: URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}))},
          "Download the export");
        clear(exportStatus).append(link, ` (${fmt(text.split("\n").length - 2)} lines)`);
      } catch (err) { clear(exportStatus).append(errorBox(err)); }
    }}, "Export (NDJSON)"), " ", exportStatus);
  if (auth.ctx.role !== "agent") {
    const confirmInput = h("input", {type: "text", id: "erase-confirm", size: 30,
                                     placeholder: "type the user id to confirm"});
    const erase = h("button", {type: "button", id: "user-erase", class: "danger", disabled: true,
      onclick: async () => {
        if (confirmInput.value !== id) return;
        erase.disabled = true;
        clear(status).append("Erasing…");
        try {
          let r = await api("DELETE", `/v1/users/${encodeURIComponent(id)}`);
          while (r.status === "running" && !signal.aborted) {
            clear(status).append(receiptView(r));
            await new Promise((ok) => setTimeout(ok, 1000));
            r = await api("GET", `/v1/erasures/${r.erasure_id}`, {signal});
          }
          clear(status).append(receiptView(r));
        } catch (err) { clear(status).append(errorBox(err)); }
      }}, "Erase this user");
    confirmInput.addEventListener("input", () => { erase.disabled = confirmInput.value !== id; });
    actions.append(h("p", {class: "muted small"}, "Erasure deletes every session, message, "
      + "summary, fact and shared-memory entry of this person, at once and for good; the "
      + "receipt keeps only counts."), confirmInput, " ", erase);
  }
  view.append(actions, status);
}
