// Usage (issue 47): what the LLM cost the tenant. Tokens per UTC day over the last 30
// days as a bar chart (input and output stacked), the totals by purpose and by model, and
// the daily token budget with today's spending.

import {api} from "./api.js";
import {h, fmt, table} from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const DAYS = 30;
const WIDTH = 600;
const HEIGHT = 160;

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** The last `DAYS` UTC days, oldest first, as YYYY-MM-DD. */
function lastDays(now = new Date()) {
  const out = [];
  for (let i = DAYS - 1; i >= 0; i--) {
    out.push(new Date(now.getTime() - i * 86400000).toISOString().slice(0, 10));
  }
  return out;
}

function chart(items) {
  const byDay = new Map(items.map((g) => [g.key, g]));
  const days = lastDays();
  const top = Math.max(1, ...items.map((g) => g.total_tokens));
  const slot = WIDTH / days.length;
  const bars = [];
  days.forEach((day, i) => {
    const g = byDay.get(day);
    if (!g) return;
    const x = (i * slot + 1).toFixed(1);
    const hin = (g.input_tokens / top) * (HEIGHT - 10);
    const hout = (g.output_tokens / top) * (HEIGHT - 10);
    const tip = `${day}: ${fmt(g.input_tokens)} in, ${fmt(g.output_tokens)} out, ${fmt(g.calls)} calls`;
    bars.push(svg("g", {"data-day": day},
      svg("title", {}, tip),
      svg("rect", {class: "bar-in", x, y: (HEIGHT - hin).toFixed(1), width: (slot - 2).toFixed(1),
                   height: hin.toFixed(1)}),
      svg("rect", {class: "bar-out", x, y: (HEIGHT - hin - hout).toFixed(1),
                   width: (slot - 2).toFixed(1), height: hout.toFixed(1)})));
  });
  return svg("svg", {id: "usage-chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH,
                     height: HEIGHT, role: "img", "aria-label": "tokens per day"},
    svg("line", {x1: 0, y1: HEIGHT, x2: WIDTH, y2: HEIGHT, class: "axis"}), ...bars);
}

function groups(id, items) {
  return table(["", "calls", "input tokens", "output tokens", "failed", "avg latency ms"],
    items.map((g) => h("tr", {dataset: {key: g.key ?? ""}},
      h("td", {}, g.key ?? "(none)"), h("td", {class: "num"}, fmt(g.calls)),
      h("td", {class: "num"}, fmt(g.input_tokens)), h("td", {class: "num"}, fmt(g.output_tokens)),
      h("td", {class: "num"}, fmt(g.failed_calls)), h("td", {class: "num"}, fmt(g.avg_latency_ms)))),
    {id});
}

export async function usagePage(view, {signal}) {
  const since = `${lastDays()[0]}T00:00:00Z`;
  const [days, purposes, models] = await Promise.all(["day", "purpose", "model"].map(
    (group_by) => api("GET", "/v1/usage", {query: {group_by, since, limit: 1000}, signal})));
  const b = days.budget;
  const budget = b.daily_tokens === null
    ? `No daily token budget; ${fmt(b.used_today)} tokens today.`
    : `Daily token budget ${fmt(b.daily_tokens)} (${b.source}); ${fmt(b.used_today)} used today`
      + (b.spent ? " — spent: summaries are heuristic, extraction waits, no rerank." : ".");
  view.append(
    h("h1", {}, "Usage"),
    h("p", {id: "usage-budget", class: b.spent ? "error" : ""}, budget),
    h("p", {id: "usage-total"}, `Last ${DAYS} days: ${fmt(days.total.calls)} LLM calls, `
      + `${fmt(days.total.input_tokens)} input and ${fmt(days.total.output_tokens)} output tokens.`),
    h("div", {class: "card"}, chart(days.items),
      h("p", {class: "muted small"}, "Tokens per UTC day: input (dark), output (light).")),
    h("h2", {}, "By purpose"), groups("usage-purposes", purposes.items),
    h("h2", {}, "By model"), groups("usage-models", models.items));
}
