// Knowledge: memory items by scope, queried with the API's filter language.

import {api} from "./api.js";
import {h, clear, fmt, when, json, errorBox} from "./dom.js";

const ORDERS = ["importance", "-importance", "created_at", "-created_at", "updated_at",
                "token_cost", "kind", "source"];

export async function knowledgePage(view, {query: q, signal}) {
  const scope = h("input", {type: "text", id: "k-scope", size: 24, value: q.scope ?? "global",
                            placeholder: "global, project/<id>, task/<id>"});
  const filters = h("textarea", {id: "k-filters", rows: 3, cols: 60},
                    q.filters || '{"importance": {"$gte": 0}}');
  const order = h("select", {id: "k-order"},
    ORDERS.map((o) => h("option", {value: o, selected: o === (q.order || "importance")}, o)));
  const out = h("div", {id: "k-results"});
  view.append(h("h1", {}, "Knowledge"),
    h("form", {class: "filters stacked", id: "k-form", onsubmit: (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams({scope: scope.value.trim(), filters: filters.value,
                                     order: order.value, run: "1"});
      location.hash = `#/knowledge?${p}`;
    }},
      h("div", {}, h("label", {for: "k-scope"}, "scope"), scope,
        h("label", {for: "k-order"}, "order by"), order),
      h("label", {for: "k-filters"}, "filters (JSON: exact values, lists, $eq $ne $gt $gte $lt "
        + "$lte; fields id, scope, kind, source, text, tags, importance, token_cost, "
        + "created_at, updated_at)"),
      filters, h("div", {}, h("button", {type: "submit"}, "Query"))),
    out);

  let parsed;
  try {
    parsed = JSON.parse(filters.value || "{}");
  } catch (err) {
    out.append(errorBox(`filters are not JSON: ${err.message}`));
    return;
  }
  if (scope.value.trim()) parsed = {...parsed, scope: scope.value.trim()};

  let cursor = null;
  const more = h("button", {type: "button", id: "k-more", hidden: true,
                            onclick: () => page().catch((err) => out.append(errorBox(err)))},
                 "More");
  const body = h("tbody", {});
  clear(out).append(h("table", {class: "wide", id: "k-table"},
    h("thead", {}, h("tr", {}, ["scope", "kind", "source", "importance", "tokens", "tags",
                               "text / payload", "updated"].map((c) => h("th", {}, c)))),
    body), more);

  async function page() {
    const got = await api("POST", "/v1/memory-items/query", {body: {
      filters: parsed, order_by: order.value, limit: 50, cursor}, signal});
    for (const item of got.items) {
      body.append(h("tr", {dataset: {id: item.id}},
        h("td", {class: "mono"}, item.scope), h("td", {}, item.kind), h("td", {}, item.source),
        h("td", {class: "num"}, fmt(item.importance)), h("td", {class: "num"},
                                                         fmt(item.token_cost)),
        h("td", {}, item.tags.join(", ")),
        h("td", {}, item.text ? h("div", {class: "text"}, item.text) : null,
          item.payload !== null && item.payload !== undefined
            ? h("details", {}, h("summary", {}, "payload"), h("pre", {class: "code"},
                                                               json(item.payload))) : null),
        h("td", {}, when(item.updated_at))));
    }
    cursor = got.next_cursor;
    more.hidden = !cursor;
    if (!body.children.length) body.append(h("tr", {}, h("td", {colspan: 8}, "No items.")));
  }
  try {
    await page();
  } catch (err) {
    if (err.name === "AbortError") throw err;
    out.append(errorBox(err));
  }
}
