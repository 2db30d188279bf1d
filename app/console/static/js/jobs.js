// Jobs and health: readiness, the queue and the worker (GET /v1/jobs), the deployment's
// compression counters (/metrics), and the background jobs of the sessions the key can see.

import {api, plain, auth} from "./api.js";
import {h, fmt, when, table} from "./dom.js";

const COUNTERS = [
  ["loom_compression_jobs_enqueued_total", "jobs enqueued"],
  ["loom_compression_jobs_run_total", "jobs finished"],
  ["loom_compression_jobs_failed_total", "jobs failed (gave up)"],
  ["loom_compression_jobs_retried_total", "tries retried"],
  ["loom_summaries_written_total", "summaries written"],
  ["loom_redis_up", "Redis up (this API process)"],
];
const PAGE = 50;
const STATUSES = ["", "failed", "running", "pending", "succeeded", "skipped"];

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
      + "this API process sees it, since its start."),
    table(["counter", "value"], COUNTERS.map(([name, label]) => h("tr", {dataset: {metric: name}},
      h("td", {}, label), h("td", {class: "num"}, fmt(metric(text, name) ?? 0)))))));

  const ctx = auth.ctx;
  const status = new URLSearchParams(location.hash.split("?")[1] || "").get("status") || "";
  const query = (cursor) => ({limit: PAGE, cursor, status: status || undefined,
    agent_id: ctx.role === "agent" ? undefined : ctx.agent || undefined});
  const first = await api("GET", "/v1/jobs", {signal, query: query()});

  const queue = first.queue;
  view.append(h("section", {class: "card", id: "queue"}, h("h2", {}, "Queue and worker"),
    queue ? h("dl", {class: "kv"},
      h("dt", {}, "jobs waiting"), h("dd", {id: "queue-depth", class: "num"}, fmt(queue.depth)),
      h("dt", {}, "worker"), h("dd", {id: "worker-alive"},
        h("span", {class: `badge ${queue.worker_alive ? "ok" : "err"}`},
          queue.worker_alive ? "alive" : "no report in the last 10 s")),
      h("dt", {}, "latest report"), h("dd", {id: "worker-report", class: "mono small"},
                                      queue.worker_report || "-"))
      : h("p", {class: "muted small"}, "Agent keys see their own jobs only, not the queue.")));

  const jobs = h("tbody", {});
  const more = h("button", {type: "button", id: "jobs-more", hidden: true}, "More");
  const filter = h("select", {id: "jobs-status"}, STATUSES.map((v) =>
    h("option", {value: v, selected: v === status}, v || "any status")));
  filter.addEventListener("change", () => {
    location.hash = `#/jobs${filter.value ? `?status=${filter.value}` : ""}`;
  });
  view.append(h("section", {class: "card", id: "jobs"},
    h("h2", {}, "Background jobs"),
    h("p", {class: "muted small"}, "Each session's latest compression and fact extraction, "
      + "most recently changed first. ", filter),
    h("table", {class: "wide", id: "jobs-table"}, h("thead", {}, h("tr", {},
      ["session", "agent", "kind", "status", "attempts", "enqueued", "started", "finished",
       "last error"].map((c) => h("th", {}, c)))), jobs), more));
  const show = (listed) => {
    for (const job of listed.items) {
      jobs.append(h("tr", {class: `job-${job.status}`, dataset: {session: job.session_id,
                                                                kind: job.kind}},
        h("td", {}, h("a", {href: `#/session/${encodeURIComponent(job.session_id)}`,
                            class: "mono"}, job.session_id.slice(0, 8))),
        h("td", {}, job.agent_id), h("td", {}, job.kind),
        h("td", {}, h("span", {class: `badge job-${job.status}`}, job.status)),
        h("td", {class: "num"}, String(job.attempts)), h("td", {}, when(job.enqueued_at)),
        h("td", {}, when(job.started_at)), h("td", {}, when(job.finished_at)),
        h("td", {}, job.last_error || "")));
    }
    more.hidden = !listed.next_cursor;
    more.onclick = async () => show(await api("GET", "/v1/jobs", {signal,
                                                                 query: query(listed.next_cursor)}));
  };
  show(first);
  if (!first.items.length) {
    jobs.append(h("tr", {id: "jobs-empty"}, h("td", {colspan: 9, class: "muted"},
                                              "No jobs yet.")));
  }
}
