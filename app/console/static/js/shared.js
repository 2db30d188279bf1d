// Shared memory: namespaces and keys (version, size, TTL), a value viewer (JSON; large
// values by their data reference), live updates from the SSE watch.

import {api, sse} from "./api.js";
import {h, clear, fmt, when, bytes, json, errorBox} from "./dom.js";

const NAMESPACES = ["global", "workflow", "swarm", "debate", "session", "agent"];
const SCOPED = new Set(["workflow", "swarm", "debate", "session"]);
const INLINE_BYTES = 256 * 1024;  // larger values are fetched by reference, on request
const PREVIEW_CHARS = 64 * 1024;

function ttl(expires) {
  if (!expires) return "none";
  const s = Math.round((new Date(expires) - Date.now()) / 1000);
  return s <= 0 ? "expired" : s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m`
    : `${Math.round(s / 3600)}h`;
}

function keyRow(k, open) {
  return h("tr", {dataset: {key: k.key}},
    h("td", {}, h("a", {href: "#", class: "mono key-link", onclick: (ev) => {
      ev.preventDefault();
      open(k.key);
    }}, k.key)),
    h("td", {class: "num version"}, String(k.version)),
    h("td", {class: "num size"}, bytes(k.size_bytes)),
    h("td", {}, k.content_type || "–"),
    h("td", {class: "ttl"}, ttl(k.expires_at)),
    h("td", {class: "updated"}, when(k.updated_at)));
}

export async function sharedPage(view, {query: q, signal}) {
  const ns = NAMESPACES.includes(q.ns) ? q.ns : "global";
  const scopeId = q.scope || "";
  const prefix = q.prefix || "";
  const base = `/v1/shared-memory/${ns}`;
  const params = {scope_id: SCOPED.has(ns) ? scopeId : undefined, prefix: prefix || undefined};

  const stats = await api("GET", "/v1/shared-memory/stats", {signal}).catch(() => null);
  const counts = Object.fromEntries((stats?.namespaces || []).map((s) => [s.namespace, s]));
  const nsSelect = h("select", {id: "sm-namespace"}, NAMESPACES.map((n) => h("option",
    {value: n, selected: n === ns}, `${n}${counts[n] ? ` (${fmt(counts[n].keys)} keys, `
      + `${bytes(counts[n].bytes)})` : ""}`)));
  const scopeInput = h("input", {type: "text", id: "sm-scope", size: 36, value: scopeId,
                                 placeholder: "scope id (workflow, swarm, debate, session)"});
  const prefixInput = h("input", {type: "text", id: "sm-prefix", size: 16, value: prefix,
                                  placeholder: "key prefix"});
  const live = h("span", {id: "sm-live", class: "badge"}, "connecting…");
  const viewer = h("div", {id: "sm-viewer"});
  const events = h("ol", {id: "sm-events", class: "events"});
  view.append(h("h1", {}, "Shared memory"),
    h("form", {class: "filters", id: "sm-form", onsubmit: (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams({ns: nsSelect.value, scope: scopeInput.value.trim(),
                                     prefix: prefixInput.value});
      for (const [k, v] of [...p]) if (!v) p.delete(k);
      location.hash = `#/shared?${p}`;
    }}, nsSelect, scopeInput, prefixInput, h("button", {type: "submit"}, "Show"), live));

  if (SCOPED.has(ns) && !scopeId) {
    view.append(h("p", {}, `The ${ns} namespace is scoped: enter a scope id.`));
    return;
  }
  const body = h("tbody", {});
  const rows = new Map();
  const more = h("button", {type: "button", id: "sm-more", hidden: true}, "More keys");
  view.append(h("div", {class: "split"},
    h("div", {}, h("table", {id: "sm-keys", class: "wide"},
      h("thead", {}, h("tr", {}, ["key", "version", "size", "type", "TTL", "updated"].map(
        (c) => h("th", {}, c)))), body), more),
    h("div", {}, viewer, h("h3", {}, "Live events"), events)));

  let shownKey = null;
  async function open(key) {
    shownKey = key;
    const path = `${base}/${encodeURIComponent(key)}`;
    clear(viewer).append(h("p", {class: "muted"}, `Loading ${key}…`));
    try {
      // the reference first: it says how large the value is before anything large is read
      const ref = await api("GET", path, {query: {...params, ref: "true"}, signal});
      const meta = h("dl", {class: "kv"}, [
        ["key", key], ["reference", ref.id], ["content type", ref.content_type],
        ["size", `${bytes(ref.size_bytes)}${ref.compressed ? " (stored gzip)" : ""}`],
        ["checksum", ref.checksum], ["location", ref.location], ["stored", when(ref.stored_at)],
      ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
      clear(viewer).append(h("h3", {}, "Value"), meta);
      const isJson = (ref.content_type || "").includes("json");
      const show = async () => {
        if (isJson) {
          const entry = await api("GET", path, {query: params, signal});
          viewer.append(h("p", {class: "muted", id: "sm-version"},
                          `version ${entry.version} · written by ${entry.writer_agent_id || "–"}`),
                        h("pre", {class: "code", id: "sm-value"}, json(entry.value)));
        } else {
          const text = String(await api("GET", `/v1/refs/${encodeURIComponent(ref.id)}`,
                                        {signal}));
          viewer.append(h("pre", {class: "code", id: "sm-value"}, text.slice(0, PREVIEW_CHARS)
            + (text.length > PREVIEW_CHARS ? "\n… (first 64 KB shown)" : "")));
        }
      };
      if (ref.size_bytes <= INLINE_BYTES) {
        await show();
      } else {
        const b = h("button", {type: "button", id: "sm-fetch", onclick: async () => {
          b.remove();
          await show().catch((err) => viewer.append(errorBox(err)));
        }}, `Fetch ${bytes(ref.size_bytes)} by reference`);
        viewer.append(b);
      }
    } catch (err) {
      if (err.name !== "AbortError") clear(viewer).append(errorBox(err));
    }
  }

  let cursor = null;
  async function page() {
    const got = await api("GET", base, {query: {...params, limit: 100, cursor}, signal});
    for (const k of got.items) {
      const tr = keyRow(k, open);
      rows.set(k.key, tr);
      body.append(tr);
    }
    cursor = got.next_cursor;
    more.hidden = !cursor;
  }
  more.addEventListener("click", () => page().catch((err) => view.append(errorBox(err))));
  await page();

  function onEvent(name, data) {
    if (name === "ready") {
      live.textContent = "live";
      live.classList.add("ok");
      return;
    }
    if (name !== "put" && name !== "delete") {
      if (name === "dropped" || name === "closed") live.textContent = `stream ${name}`;
      return;
    }
    events.prepend(h("li", {}, `${when(data.at)} ${name} ${data.key}`
      + (data.version ? ` v${data.version}` : "")));
    while (events.children.length > 20) events.lastChild.remove();
    const old = rows.get(data.key);
    if (name === "delete") {
      old?.remove();
      rows.delete(data.key);
      return;
    }
    const row = keyRow({key: data.key, version: data.version, size_bytes: data.size_bytes,
                        content_type: data.content_type,
                        expires_at: null, updated_at: data.at}, open);
    if (old) {
      const ttlText = old.querySelector(".ttl").textContent;
      row.querySelector(".ttl").textContent = ttlText;  // the event does not carry the TTL
      old.replaceWith(row);
    } else {
      body.append(row);
    }
    row.classList.add("flash");
    rows.set(data.key, row);
    if (data.key === shownKey) open(data.key);  // the viewer follows the value
  }

  // the watch runs until the page is left (the router aborts `signal`)
  sse(`${base}/watch`, {...params, heartbeat_seconds: 15}, onEvent, signal).then(() => {
    live.textContent = "stream ended";
    live.classList.remove("ok");
  }, (err) => {
    if (err.name === "AbortError") return;
    live.textContent = "not live";
    live.classList.remove("ok");
    view.append(errorBox(err));
  });
}
