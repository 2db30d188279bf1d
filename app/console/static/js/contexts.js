// What the model saw: a session's recorded context builds (their layer bars), one build's
// blocks with "why is this here" on a click, a replay to the same bytes, and the diff of
// two builds. Reads GET /v1/sessions/{id}/contexts[/{context_id}], .../replay, .../diff.

import {api} from "./api.js";
import {h, clear, fmt, when, json, errorBox, table} from "./dom.js";

// layer of a block -> the layer bar's colour (the session page's classes)
const SEG = {rom: "rom", kernel: "kernel", block: "blocks", l2: "l2", promoted: "promoted",
             recalled: "recalled", l1: "l1"};
const ORDER = ["rom", "kernel", "blocks", "facts", "l2", "promoted", "recalled", "l1",
               "overhead"];

function miniBar(tokens, budget, id) {
  const bar = h("div", {class: "bar mini", id});
  const keys = [...ORDER, ...Object.keys(tokens).filter((k) => !ORDER.includes(k))];
  for (const key of keys) {
    const n = tokens[key] || 0;
    if (n <= 0) continue;
    const seg = h("div", {class: `seg seg-${key}`, title: `${key}: ${fmt(n)} tokens`});
    seg.style.width = `${(100 * n) / budget}%`;
    bar.append(seg);
  }
  return bar;
}

function short(sha) {
  return sha ? sha.slice(0, 12) : "–";
}

function blockLabel(b) {
  const src = b.sources[0] || {};
  if (b.layer === "block") return `${b.name} (${b.sources.length} sources)`;
  if (src.kind === "message") return `msg:${src.seq} ${src.role}`;
  if (src.range) return `${src.kind} msg:${src.range[0]}–${src.range[1]}`;
  return b.key;
}

function whyPanel(box, b) {
  clear(box).append(
    h("h3", {}, `Why is ${b.key} here?`),
    h("p", {id: "why-text"}, b.why),
    h("dl", {class: "kv"},
      h("dt", {}, "layer"), h("dd", {}, b.layer),
      h("dt", {}, "position"), h("dd", {}, String(b.position)),
      h("dt", {}, "tokens"), h("dd", {}, fmt(b.tokens)),
      h("dt", {}, "cache_control"), h("dd", {}, b.cache_control ? json(b.cache_control) : "–"),
      b.truncated_to !== null ? [h("dt", {}, "truncated to"),
                                 h("dd", {}, `${b.truncated_to} tokens`)] : null,
      b.tool_calls_left_out.length ? [h("dt", {}, "tool calls left out"),
                                      h("dd", {}, b.tool_calls_left_out.join(", "))] : null),
    h("h3", {}, "Sources"),
    h("pre", {class: "code", id: "why-sources"}, json(b.sources)),
    h("div", {}, b.replay ? [h("h3", {}, "Rendering inputs"),
                             h("pre", {class: "code"}, json(b.replay))] : null));
}

async function showBuild(box, sid, id, signal) {
  const m = await api("GET", `/v1/sessions/${sid}/contexts/${id}`, {signal});
  const why = h("div", {class: "card why", id: "why"},
                h("p", {class: "muted"}, "Click a block to see why it is there."));
  const rows = m.blocks.map((b) => h("tr", {class: "block-row", id: `block-${b.position}`,
    dataset: {key: b.key, layer: b.layer},
    onclick: () => {
      for (const r of box.querySelectorAll("tr.block-row")) r.classList.remove("picked");
      rows[b.position].classList.add("picked");
      whyPanel(why, b);
    }},
    h("td", {class: "num"}, String(b.position)),
    h("td", {}, h("span", {class: `swatch seg-${SEG[b.layer] || b.layer}`}), b.layer),
    h("td", {class: "mono"}, blockLabel(b)),
    h("td", {class: "num"}, fmt(b.tokens)),
    h("td", {}, b.cache_control ? "cached" : "")));
  const decisions = m.decisions.map((d) => h("tr", {},
    h("td", {}, d.action), h("td", {}, d.layer), h("td", {class: "mono"}, d.keys.join(", ")),
    h("td", {}, d.why)));
  const replayOut = h("div", {id: "replay-result"});
  const replay = (fmt_) => async () => {
    clear(replayOut).append("replaying…");
    try {
      const r = await api("POST", `/v1/sessions/${sid}/contexts/${id}/replay`,
                          {query: {format: fmt_}, signal});
      const same = r.sha256 === m.sha256[fmt_];
      clear(replayOut).append(h("span", {class: `badge ${same ? "ok" : "err"}`},
        same ? `same bytes (${fmt_})` : "different bytes"), ` sha256 ${short(r.sha256)}`);
    } catch (err) {
      clear(replayOut).append(errorBox(err), h("ul", {id: "replay-changes"},
        (err.details?.changed || []).map((c) => h("li", {}, c))));
    }
  };
  clear(box).append(
    h("h2", {}, "Build ", h("span", {class: "mono", id: "build-id"}, m.context_id)),
    h("p", {}, `${when(m.created_at)} · ${m.format} · ${fmt(m.total_tokens)} of `
      + `${fmt(m.budget)} tokens (${(m.usage * 100).toFixed(1)}%) · tokenizer `
      + `${m.tokenizer.name} · ROM ${m.versions.rom_profile_version === null ? "inline"
        : `profile v${m.versions.rom_profile_version}`} · `
      + `config ${short(m.config_sha256)}`),
    h("div", {class: "bar-wrap"}, miniBar(m.tokens, m.budget, "build-bar")),
    h("div", {class: "actions"}, ["anthropic", "openai", "raw"].map((f) =>
      h("button", {type: "button", class: "small", id: `replay-${f}`, onclick: replay(f)},
        `Replay ${f}`)), replayOut),
    h("div", {class: "split"},
      h("div", {}, table(["#", "layer", "block", "tokens", "cache"], rows,
                         {id: "blocks-table", class: "wide"})),
      why),
    h("h3", {}, `Dropped or shrunk (${m.decisions.length})`),
    m.decisions.length ? table(["action", "layer", "what", "why"], decisions,
                               {id: "decisions-table"}) : h("p", {class: "muted"}, "nothing"),
    h("h3", {}, "SHA-256 of the rendered bytes"),
    h("dl", {class: "kv", id: "hashes"}, Object.entries(m.sha256).map(([f, s]) =>
      [h("dt", {}, f), h("dd", {class: "mono"}, s)])));
}

function diffView(d) {
  const delta = (n) => (n > 0 ? `+${fmt(n)}` : fmt(n));
  const rows = [
    ...d.added.map((x) => h("tr", {class: "diff-added"}, h("td", {}, "added"),
      h("td", {class: "mono"}, x.key), h("td", {}, x.layer), h("td", {class: "num"},
                                                             delta(x.token_delta)))),
    ...d.removed.map((x) => h("tr", {class: "diff-removed"}, h("td", {}, "removed"),
      h("td", {class: "mono"}, x.key), h("td", {}, x.layer), h("td", {class: "num"},
                                                               delta(x.token_delta)))),
    ...d.changed.map((x) => h("tr", {class: "diff-changed"}, h("td", {}, "changed"),
      h("td", {class: "mono"}, x.key),
      h("td", {}, x.layer_a === x.layer_b ? x.layer_a : `${x.layer_a} → ${x.layer_b}`,
        h("span", {class: "muted small"}, ` (${x.fields.join(", ")})`)),
      h("td", {class: "num"}, delta(x.token_delta)))),
  ];
  const layers = Object.entries(d.layer_token_deltas).map(([k, v]) => `${k} ${delta(v)}`);
  return [
    h("h2", {}, "Diff"),
    h("p", {id: "diff-summary"}, `${d.added.length} added · ${d.removed.length} removed · `
      + `${d.changed.length} changed · ${d.unchanged} unchanged · tokens `
      + `${delta(d.token_delta)} (${fmt(d.total_tokens_a)} → ${fmt(d.total_tokens_b)})`),
    h("p", {class: "muted"}, `by layer: ${layers.join(", ") || "no change"} · same bytes: `
      + Object.entries(d.same_bytes).map(([f, s]) => `${f} ${s ? "yes" : "no"}`).join(", ")
      + (d.config_changed ? " · config changed" : "")),
    rows.length ? table(["", "block", "layer", "tokens"], rows, {id: "diff-table"})
      : h("p", {class: "muted"}, "The two builds have the same blocks."),
  ];
}

export async function contextsPage(view, {args, query, signal}) {
  const sid = encodeURIComponent(args[0] || "");
  const list = h("tbody", {});
  const detail = h("section", {class: "card", id: "build"},
                   h("p", {class: "muted"}, "Pick a build to see its blocks."));
  const diffBox = h("section", {class: "card", id: "diff"});
  diffBox.hidden = true;
  const status = h("div", {id: "history-status"});
  let cursor = null;
  const more = h("button", {type: "button", class: "small", id: "more-builds",
                            onclick: () => load().catch((e) => status.append(errorBox(e)))},
                 "Older builds");
  const pick = {a: null, b: null};
  const diffButton = h("button", {type: "button", id: "diff-button", disabled: true,
    onclick: async () => {
      diffBox.hidden = false;
      clear(diffBox).append("comparing…");
      try {
        const d = await api("GET", `/v1/sessions/${sid}/contexts/${pick.a}/diff/${pick.b}`,
                            {signal});
        clear(diffBox).append(...diffView(d));
      } catch (err) {
        clear(diffBox).append(errorBox(err));
      }
    }}, "Diff A → B");

  async function load() {
    const page = await api("GET", `/v1/sessions/${sid}/contexts`,
                           {query: {limit: 20, cursor: cursor || undefined}, signal});
    for (const c of page.items) {
      const radio = (side) => h("input", {type: "radio", name: `pick-${side}`,
        id: `pick-${side}-${c.context_id}`, value: c.context_id, onchange: () => {
          pick[side] = c.context_id;
          diffButton.disabled = !(pick.a && pick.b && pick.a !== pick.b);
        }});
      list.append(h("tr", {class: "build-row", dataset: {id: c.context_id}},
        h("td", {}, radio("a")), h("td", {}, radio("b")),
        h("td", {}, h("a", {href: `#/contexts/${sid}?build=${c.context_id}`,
                            class: "mono build-link"}, short(c.context_id))),
        h("td", {}, when(c.created_at)), h("td", {}, c.format),
        h("td", {class: "num"}, `${fmt(c.total_tokens)} / ${fmt(c.budget)}`),
        h("td", {class: "bar-cell"}, miniBar(c.tokens, c.budget)),
        h("td", {class: "num"}, String(c.blocks)),
        h("td", {class: "mono small"}, short(c.sha256[c.format]))));
    }
    cursor = page.next_cursor;
    more.hidden = !cursor;
    if (!list.children.length) {
      clear(status).append(h("p", {class: "muted"}, "No recorded builds. Turn on the "
        + "session's config.audit, or build with record: true."));
    }
  }

  view.append(
    h("h1", {}, "Context history ", h("span", {class: "mono", id: "history-session"},
                                      decodeURIComponent(sid))),
    h("p", {}, h("a", {href: `#/session/${sid}`}, "← session"), " · what the model saw in "
      + "each recorded build, and why each block was there"),
    h("section", {class: "card", id: "history"},
      table(["A", "B", "build", "when", "format", "tokens", "layers", "blocks", "sha256"],
            [], {id: "history-table", class: "wide"}),
      status, h("div", {class: "actions"}, more, diffButton)),
    diffBox, detail);
  view.querySelector("#history-table tbody").replaceWith(list);
  list.id = "history-rows";
  await load();
  const first = query.build || list.querySelector("tr.build-row")?.dataset.id;
  if (first) await showBuild(detail, sid, encodeURIComponent(first), signal);
}
