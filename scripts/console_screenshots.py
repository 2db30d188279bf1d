"""Screenshots of the console's main pages and the time to first render of a 10,000-message
session, from a live server with sample data. The PNGs go to a new temporary directory (or
--out DIR); --update-docs replaces the committed ones in docs/console/ instead.

    .venv/bin/python scripts/console_screenshots.py              # own server, fresh database
    .venv/bin/python scripts/console_screenshots.py --base http://127.0.0.1:8420 \\
        --admin-key "$(cat .loom/admin_key)"                     # a running server
    .venv/bin/python scripts/console_screenshots.py --update-docs  # docs/console/*.png

Without --base it creates a database on the machine's PostgreSQL (LOOM_TEST_PG, as the
tests do), migrates it, starts `serve` on a free port (Redis: LOOM_TEST_REDIS), and drops
the database at the end. The browser is Debian's chromium, driven by Playwright.
"""

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.console.sample import (  # noqa: E402
    Tenant,
    audited_session,
    layered_session,
    long_session,
    new_tenant,
)

REDIS_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
DOCS = ROOT / "docs" / "console"  # the README's screenshots: only with --update-docs


@contextmanager
def own_server() -> Iterator[tuple[str, str]]:
    """A `serve` process on a fresh, migrated database; yields (base URL, admin key)."""
    from app.core.config import Settings
    from app.launcher.migrate import upgrade
    from tests.support.databases import fresh_database, url_of
    from tests.support.live import live_api

    with fresh_database("loom_console") as name:
        url = url_of(name)
        upgrade(url)
        admin_key = "lm_console_" + secrets.token_urlsafe(24)
        settings = Settings(DATABASE_URL=url, REDIS_URL=REDIS_URL, LOOM_ADMIN_KEY=admin_key,
                            LOOM_QUEUE_NAME=f"loom:console:{uuid.uuid4().hex[:12]}")
        with live_api(settings) as base:
            yield base, admin_key


def sample(tenant: Tenant, long_messages: int = 10_000) -> dict[str, str]:
    """Sessions of two agents (one with ROM, Kernel tools, L1, L2, snapshots and promoted
    messages), shared memory, knowledge items, and a 10,000-message session."""
    with tenant.client("planner") as c:
        sid = layered_session(c, turns=28, metadata={"project": "apollo", "ticket": "OPS-42"})
        c.put(f"/v1/sessions/{sid}/kernel/tools", json={"tools": [
            {"name": "run_sql", "description": "Run a read-only SQL query on the replica.",
             "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
        ]}).raise_for_status()
        c.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1, 2]}).raise_for_status()
        long = long_session(c, long_messages)
        for key, value in (("plan", {"step": 3, "owner": "planner", "window": "Sun 02:00"}),
                           ("runbook/cutover", {"steps": ["freeze", "snapshot", "upgrade"]}),
                           ("status", "green")):
            c.put(f"/v1/shared-memory/global/{key}", json={"value": value}).raise_for_status()
        c.put("/v1/shared-memory/global/lease", json={"value": {"holder": "worker-2"}},
              params={"ttl_seconds": 900}).raise_for_status()
        for n, (kind, text) in enumerate((
                ("decision", "Upgrade PostgreSQL with pg_upgrade in the Sunday window."),
                ("constraint", "Billing must stay read-only during the cutover."),
                ("note", "The replica lags up to 30 s under the nightly batch."))):
            c.post("/v1/memory-items", json={
                "scope": "project/apollo", "kind": kind, "text": text, "source": "planner",
                "tags": ["migration"], "importance": 0.9 - n * 0.2}).raise_for_status()
    with tenant.client("reviewer") as c:
        layered_session(c, turns=6, metadata={"project": "apollo"})
    # end users: sessions of theirs and a fact about one (the Users tab and a user's page)
    with tenant.client("support") as c:
        for user, text in (("ada", "Ada's invoices go to the Berlin office."),
                           ("grace", "Grace asked to move the cutover to Sunday.")):
            for _ in range(2):
                s = c.post("/v1/sessions", json={"user_id": user}).json()["id"]
                c.post(f"/v1/sessions/{s}/messages", json={"messages": [
                    {"role": "user", "content": text}]}).raise_for_status()
        c.post("/v1/memory-items", json={
            "scope": "user/ada", "kind": "fact",
            "text": "Prefers invoices as PDF, in German."}).raise_for_status()
    with tenant.client("auditor") as c:
        audited, builds = audited_session(c)
    return {"layered": sid, "long": long, "audited": audited, "first_build": builds[0],
            "last_build": builds[-1]}


def context_history(page: Any, ids: dict[str, str]) -> None:
    """The history with a diff of the first and last build, and why a block is there."""
    page.check(f"#pick-a-{ids['first_build']}")
    page.check(f"#pick-b-{ids['last_build']}")
    page.click("#diff-button")
    page.wait_for_selector("#diff-table")
    page.click("#blocks-table tr.block-row[data-layer='block']")
    page.wait_for_selector("#why-text")


def first_render_ms(browser: Any, base: str, key: str, sid: str,
                    runs: int) -> dict[str, list[float]]:
    """Time until a session's timeline shows, `runs` times each: navigating to it within the
    signed-in console, and loading the page afresh (a reload: HTML, modules, then the API)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    sign_in(page, base, key)
    times: dict[str, list[float]] = {"navigation": [], "page load": []}
    for _ in range(runs):
        page.goto(f"{base}/console#/search")  # a page that calls no API: an idle server
        page.wait_for_load_state("networkidle")
        time.sleep(1)
        started = time.perf_counter()
        page.goto(f"{base}/console#/session/{sid}")
        page.wait_for_selector("#timeline .msg")
        times["navigation"].append((time.perf_counter() - started) * 1000)
        page.wait_for_load_state("networkidle")
        time.sleep(1)
        started = time.perf_counter()
        page.reload()
        page.wait_for_selector("#timeline .msg")
        times["page load"].append((time.perf_counter() - started) * 1000)
        page.wait_for_load_state("networkidle")
    context.close()
    return times


def sign_in(page: Any, base: str, key: str) -> None:
    page.goto(f"{base}/console")
    page.fill("#key", key)
    page.click("#signin-button")
    page.wait_for_selector("#role")


def shoot(browser: Any, base: str, key: str, ids: dict[str, str], out: Path,
          only: set[str] | None = None) -> list[Path]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    sign_in(page, base, key)
    out.mkdir(parents=True, exist_ok=True)
    shots = [
        # (file, page, shown when ready, scrolled to)
        ("sessions", "#/sessions", "#sessions-table td[data-layer='l1']:not(:empty)", None),
        ("session", f"#/session/{ids['layered']}", "#l2-table", None),
        ("session-timeline", f"#/session/{ids['layered']}", "#l2-table", "#messages"),
        ("session-summaries", f"#/session/{ids['layered']}", "#l2-table", "#summaries"),
        ("search", "#/search?q=rollback+window&scope=agent&agent=planner",
         "#search-results .hit", None),
        ("shared-memory", "#/shared?ns=global", "#sm-live.ok", None),
        ("knowledge", "#/knowledge?scope=project/apollo&run=1", "#k-table tbody tr", None),
        ("jobs", "#/jobs", "#jobs-table tbody tr", None),
        ("users", "#/users", '#users-table tr[data-user="ada"]', None),
        ("user", "#/user/ada", "#user-facts", None),
        ("long-session", f"#/session/{ids['long']}", "#l2-table", "#messages"),
        ("context-history", f"#/contexts/{ids['audited']}", "#blocks-table tr.block-row",
         None),
    ]
    if only:
        shots = [s for s in shots if s[0] in only]
    written = []
    for name, target, ready, scroll in shots:
        page.goto(f"{base}/console#/jobs")  # leave the page, so the next one renders afresh
        page.goto(f"{base}/console{target}")
        page.wait_for_selector(ready)
        if name == "shared-memory":
            page.click("#sm-keys .key-link >> text=plan")
            page.wait_for_selector("#sm-value")
        if name == "context-history":
            context_history(page, ids)
        page.wait_for_load_state("networkidle")
        if scroll:
            page.locator(scroll).evaluate("el => el.scrollIntoView()")
        path = out / f"{name}.png"
        # the history, a diff and a build's blocks make one tall page: all of it
        page.screenshot(path=str(path), full_page=name == "context-history")
        written.append(path)
    context.close()
    return written


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a running server (default: start one)")
    parser.add_argument("--admin-key", default=os.environ.get("LOOM_ADMIN_KEY"))
    parser.add_argument("--runs", type=int, default=5, help="first-render measurements")
    parser.add_argument("--only", default="", help="comma-separated screenshot names "
                        "(e.g. context-history); skips the first-render measurements")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="where to write the PNGs (default: a new "
                       "temporary directory)")
    where.add_argument("--update-docs", action="store_true",
                       help=f"replace the committed screenshots in {DOCS.relative_to(ROOT)}/")
    return parser.parse_args(argv)


def output_dir(args: argparse.Namespace) -> Path:
    """Where the PNGs go: docs/console/ only when asked with --update-docs."""
    if args.update_docs:
        return DOCS
    return args.out or Path(tempfile.mkdtemp(prefix="loom-console-screenshots-"))


def main() -> None:
    args = parse()
    out = output_dir(args)
    from playwright.sync_api import sync_playwright

    with (contextmanager(lambda: iter([(args.base, args.admin_key)]))() if args.base
          else own_server()) as (base, admin_key):
        tenant = new_tenant(base, admin_key)
        ids = sample(tenant, 200 if args.only else 10_000)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=["--no-sandbox"])
            try:
                only = {n for n in args.only.split(",") if n} or None
                for path in shoot(browser, base, tenant.service_key, ids, out, only):
                    print(f"wrote {path}")
                times = {} if only else first_render_ms(browser, base, tenant.service_key,
                                                         ids["long"], args.runs)
            finally:
                browser.close()
        for how, ms in times.items():
            print(f"10,000-message session, {how} until the timeline shows: median "
                  f"{statistics.median(ms):.0f} ms, min {min(ms):.0f}, max {max(ms):.0f} "
                  f"({len(ms)} runs)")

if __name__ == "__main__":
    main()
