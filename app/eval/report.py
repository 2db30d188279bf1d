"""The LoCoMo harness's table and plot (matplotlib, the optional extra `[eval]`: without
it the plot is skipped with a note)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODE_NAMES = {"recall": "recall on", "no_recall": "recall off", "last_n": "last N that fit"}


def _f(value: Any, width: int, digits: int = 1) -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.{digits}f}"


def table(result: dict[str, Any]) -> str:
    """The figures as text: search recall and latency, then the context per budget."""
    meta, figs = result["meta"], result["figures"]
    lines = [
        f"LoCoMo evidence recall - {', '.join(meta['samples'])}: "
        f"{meta['questions']} questions, {meta['turns']:,} turns; "
        f"{meta['when'][:19]}Z, commit {meta['git_commit'][:10] or '?'}, "
        f"server {meta['server']}"
    ]
    search = figs["search"]
    if search["questions"]:
        lines += [
            "",
            "Search (limit 20, no rerank)     R@5   R@10   R@20   p50 ms   p95 ms",
            "-" * 72,
        ]

        def srow(name: str, s: dict[str, Any]) -> str:
            lat = s["latency_ms"]
            return (
                f"{name:30}"
                + _f(s["r@5"], 6)
                + _f(s["r@10"], 7)
                + _f(s["r@20"], 7)
                + _f(lat["p50"], 9)
                + _f(lat["p95"], 9)
            )

        for c, s in figs["search_by_category"].items():
            lines.append(srow(f"category {c} ({s['questions']})", s))
        lines.append(srow(f"all ({search['questions']})", search))
    if figs["context"]:
        lines += [
            "",
            "Context: share of evidence turns in the built context (recall.query = the question)",
            f"{'budget':>7}  {'':16}{'evidence %':>11}{'tokens':>9}{'p50 ms':>9}"
            f"{'p95 ms':>9}   {'recent: n':>9}{'%':>7}",
            "-" * 81,
        ]
        for budget, c in c_items(figs["context"]):
            recent = c["recent"]
            for i, mode in enumerate(("recall", "no_recall", "last_n")):
                m = c[mode]
                lat = m.get("latency_ms") or {}
                lines.append(
                    f"{budget if i == 0 else '':>7}  {MODE_NAMES[mode]:16}"
                    + _f(m["evidence_recall"], 11)
                    + _f(m["tokens_mean"], 9, 0)
                    + _f(lat.get("p50"), 9)
                    + _f(lat.get("p95"), 9)
                    + f"   {recent['questions'] if i == 0 else '':>9}"
                    + _f(recent[mode], 7)
                )
        lines += [
            "",
            "recent: the questions whose evidence all lies in the newest turns "
            "that fit the budget; latencies are the client's (HTTP included), one "
            "request at a time",
        ]
    return "\n".join(lines)


def c_items(context: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return sorted(((int(b), c) for b, c in context.items()), key=lambda x: x[0])


def plot(result: dict[str, Any], path: Path) -> str | None:
    """Recall against budget and latency against budget, as a PNG; None when done, else
    why not (matplotlib missing, nothing to plot)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'loom-memory-server[eval]'): no plot"
    context = c_items(result["figures"]["context"])
    if not context:
        return "no context figures to plot"
    budgets = [b for b, _ in context]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"recall": "o-", "no_recall": "s--", "last_n": "^:"}
    for mode, style in styles.items():
        left.plot(
            budgets, [c[mode]["evidence_recall"] for _, c in context], style, label=MODE_NAMES[mode]
        )
    search = result["figures"]["search"]
    if search["questions"]:
        left.axhline(search["r@10"], color="grey", linewidth=0.8)
        left.annotate(
            f"search R@10 {search['r@10']:.1f}",
            (budgets[0], search["r@10"]),
            textcoords="offset points",
            xytext=(2, -11),
            fontsize=8,
            color="grey",
        )
    left.set(
        xscale="log",
        xlabel="context budget (tokens)",
        ylabel="evidence turns in the context (%)",
        ylim=(0, 100),
        title="Evidence in the built context",
    )
    left.set_xticks(budgets, [f"{b:,}" for b in budgets])
    left.minorticks_off()
    left.legend(loc="lower right")
    left.grid(alpha=0.3)
    for mode, style in (("recall", "o-"), ("no_recall", "s--")):
        p50 = [c[mode]["latency_ms"]["p50"] for _, c in context]
        p95 = [c[mode]["latency_ms"]["p95"] for _, c in context]
        line = right.plot(budgets, p50, style, label=f"build, {MODE_NAMES[mode]} (p50)")[0]
        right.plot(
            budgets,
            p95,
            style[0],
            color=line.get_color(),
            alpha=0.5,
            label=f"build, {MODE_NAMES[mode]} (p95)",
        )
    if search["questions"]:
        right.axhline(
            search["latency_ms"]["p50"], color="grey", linewidth=0.8, label="search (p50)"
        )
    top = max(
        [c[m]["latency_ms"]["p95"] or 0 for _, c in context for m in ("recall", "no_recall")] + [1]
    )
    right.set(
        xscale="log",
        xlabel="context budget (tokens)",
        ylabel="ms (client, HTTP)",
        title="Latency",
        ylim=(0, top * 1.6),
    )
    right.set_xticks(budgets, [f"{b:,}" for b in budgets])
    right.minorticks_off()
    right.legend(fontsize=8, ncol=2, loc="upper left")
    right.grid(alpha=0.3)
    meta = result["meta"]
    fig.suptitle(
        f"LoCoMo {', '.join(meta['samples'])} ({meta['questions']} questions)", fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
