// Jobs and health: readiness, the deployment's compression counters (/metrics), and the
// compression job of each session the key can see (the API has no list of jobs).

import {api, plain, auth} from "./api.js";
import {h, fmt, when, table} from "./dom.js";
import {pool} from "./sessions.js";

const COUNTERS = [
  ["loom_compression_jobs_enqueued_total", "jobs enqueued"],
  ["loom_compression_jobs_run_total", "jobs finished"],
  ["loom_compression_jobs_failed_total", "jobs failed (gave up)"],
  ["loom_compression_jobs_retried_total", "tries retried"],
  ["loom_summaries_written_total", "summaries written"],
  ["loom_redis_up", "Redis up (this API process)"],
];
const SCAN = 200;

/** Sum of a Prometheus metric's samples (all label sets). */
function metric(text, name) {
  let total = null;
  for (const line of text.split("\n")) {
    if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
      total = (total ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return total;
}

export async function jobsPage(view, {signal}) {
  view.append(h("h1", {}, "Jobs and health"));
  const [health, ready, metrics] = await Promise.all([
    plain("/healthz"), plain("/readyz"), plain("/metrics")]);
  const checks = ready.body?.checks || ready.body?.error?.details || {};
  view.append(h("section", {class: "card", id: "health"}, h("h2", {}, "Health"),
    h("dl", {class: "kv"},
      h("dt", {}, "API process"), h("dd", {id: "healthz"}, health.status === 200 ? "up" : "down"),
      h("dt", {}, "ready"), h("dd", {id: "readyz"}, ready.status === 200 ? "ready"
                                                     : `not ready (${ready.status})`),
      Object.entries(checks).map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]))));

  const text = typeof metrics.body === "string" ? metrics.body : "";
  view.append(h("section", {class: "card", id: "counters"},
    h("h2", {}, "Compression counters"),
    h("p", {class: "muted small"}, "From /metrics: the whole deployment (every tenant) as "
      + "this API process sees it, since its start. Queue depth and worker liveness are not "
      + "exposed by the API."),
    table(["counter", "value"], COUNTERS.map(([name, label]) => h("tr", {dataset: {metric: name}},
      h("td", {}, label), h("td", {class: "num"}, fmt(metric(text, name) ?? 0)))))));

  const jobs = h("tbody", {});
  const note = h("p", {class: "muted small", id: "jobs-note"}, "Scanning sessions…");
  view.append(h("section", {class: "card", id: "jobs"},
    h("h2", {}, "Compression jobs of your sessions"), note,
    h("table", {class: "wide", id: "jobs-table"}, h("thead", {}, h("tr", {},
      ["session", "agent", "status", "attempts", "enqueued", "started", "finished",
       "last error", "usage"].map((c) => h("th", {}, c)))), jobs)));
  const ctx = auth.ctx;
  const listed = await api("GET", "/v1/sessions", {signal, query: {
    limit: SCAN, agent_id: ctx.role === "agent" ? undefined : ctx.agent || undefined}});
  const found = [];
  await pool(listed.items, 4, async (s) => {
    try {
      const memory = await api("GET", `/v1/sessions/${s.id}/memory`, {signal});
      if (memory.compression) found.push([s, memory]);
    } catch (err) {
      if (err.name === "AbortError") throw err;
    }
  });
  const order = {running: 0, failed: 1, pending: 2, succeeded: 3};
  found.sort((a, b) => order[a[1].compression.status] - order[b[1].compression.status]);
  for (const [s, memory] of found) {
    const job = memory.compression;
    jobs.append(h("tr", {class: `job-${job.status}`},
      h("td", {}, h("a", {href: `#/session/${encodeURIComponent(s.id)}`, class: "mono"},
                    s.id.slice(0, 8))),
      h("td", {}, s.agent_id), h("td", {}, h("span", {class: `badge job-${job.status}`},
                                             job.status)),
      h("td", {class: "num"}, String(job.attempts)), h("td", {}, when(job.enqueued_at)),
      h("td", {}, when(job.started_at)), h("td", {}, when(job.finished_at)),
      h("td", {}, job.last_error || ""), h("td", {class: "num"},
                                           `${(memory.usage * 100).toFixed(1)}%`)));
  }
  const counts = found.reduce((acc, [, m]) => {
    acc[m.compression.status] = (acc[m.compression.status] || 0) + 1;
    return acc;
  }, {});
  note.textContent = `${listed.items.length} sessions scanned${listed.next_cursor
    ? ` (the first ${SCAN})` : ""}: ` + (Object.entries(counts).map(([k, v]) => `${v} ${k}`)
    .join(", ") || "no compression jobs yet");
}
