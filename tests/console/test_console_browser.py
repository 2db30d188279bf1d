"""The console in headless Chromium against a live server on real PostgreSQL and Redis."""

import re
from typing import Any

import httpx
import pytest

from tests.console.conftest import sign_in
from tests.console.sample import Tenant, layered_session, long_session

pytestmark = pytest.mark.slow

AGENT = "planner"
XSS = [
    'payload <script>window.__xss = "script"</script>',
    "payload <img src=x onerror=\"window.__xss = 'img'\">",
    "payload <svg onload=\"window.__xss = 'svg'\"></svg>",
]


@pytest.fixture(scope="module")
def layered(console_tenant: Tenant) -> str:
    """A session of `planner` with messages in L1, summaries in L2 and snapshots in swap."""
    with console_tenant.client(AGENT) as c:
        return layered_session(c, metadata={"project": "apollo"})


def test_sign_in_lists_sessions_with_tokens_per_layer(
    page: Any, server: str, console_tenant: Tenant, layered: str
):
    sign_in(page, server, console_tenant.service_key)
    assert page.text_content("#role") == "service"
    # the key is in this tab's sessionStorage, not in the URL or a cookie
    assert page.evaluate("sessionStorage.getItem('loom.console.key')") == console_tenant.service_key
    assert console_tenant.service_key not in page.url
    assert page.context.cookies() == []
    row = page.locator(f'#sessions-table tr[data-session="{layered}"]')
    row.wait_for()
    with console_tenant.client(AGENT) as c:
        session = c.get(f"/v1/sessions/{layered}").json()
    assert row.locator(".agent").text_content() == AGENT
    assert row.locator(".count").text_content() == str(session["message_count"])
    for layer in ("rom", "kernel", "l2", "promoted", "l1"):
        cell = row.locator(f'td[data-layer="{layer}"]')
        expect_text(cell, f"{session['memory'][layer]:,}")
    # the metadata filter keeps matching sessions and drops the others
    page.fill("#filter-meta", "project=apollo")
    page.press("#filter-meta", "Enter")
    page.wait_for_url(re.compile(r"meta=project"))
    page.locator(f'#sessions-table tr[data-session="{layered}"]').wait_for()
    page.fill("#filter-meta", "project=other")
    page.press("#filter-meta", "Enter")
    page.locator("#sessions-empty").wait_for()


def expect_text(locator: Any, text: str) -> None:
    from playwright.sync_api import expect

    expect(locator).to_have_text(text)


def test_session_layer_bar_equals_the_built_context(
    page: Any, server: str, console_tenant: Tenant, layered: str
):
    sign_in(page, server, console_tenant.service_key, f"#/session/{layered}")
    page.locator("#timeline .msg").first.wait_for()
    with console_tenant.client(AGENT) as c:
        ctx = c.post(f"/v1/sessions/{layered}/context", json={"format": "raw"}).json()
        memory = c.get(f"/v1/sessions/{layered}/memory").json()
    shown = {
        tr.get_attribute("data-layer"): int(tr.locator(".tokens").text_content())
        for tr in page.locator("#layer-table tbody tr").all()
    }
    # every layer of the build, recalled (absent while recall is off) as 0, and what is free
    expected = {"recalled": 0, **ctx["tokens"], "free": ctx["budget"] - ctx["total_tokens"]}
    assert shown == expected
    assert ctx["tokens"]["l1"] > 0 and ctx["tokens"]["l2"] > 0
    assert int(page.text_content("#total-tokens")) == ctx["total_tokens"]
    assert int(page.text_content("#budget")) == ctx["budget"]
    # the bar draws each non-empty layer, and the 70/80/85 thresholds
    for layer, tokens in ctx["tokens"].items():
        assert page.locator(f"#layer-bar .seg-{layer}").count() == (1 if tokens else 0)
    assert page.locator("#layer-bar .threshold").all_text_contents() == ["70%", "80%", "85%"]

    # the timeline pages from the newest message; L1, L2 and swap all appear on page one
    page.click("#first-page")
    page.locator("#msg-1").wait_for()
    places = {m.get_attribute("data-place") for m in page.locator("#timeline .msg").all()}
    assert {"L1", "L2"} <= places and places & {"swap", "swap (snapshot)"}
    for seq in ctx["l1_seqs"]:
        assert page.get_attribute(f"#msg-{seq}", "data-place") == "L1"
    first_l2 = memory["l2"][0]["start_seq"]
    assert page.get_attribute(f"#msg-{first_l2}", "data-place") == "L2"
    assert page.get_attribute("#msg-1", "data-place").startswith("swap")
    # a tool_use and its tool_result are shown together
    group = page.locator(".tool-group").first
    assert group.locator(".msg").count() == 2
    assert group.locator(".msg").nth(1).get_attribute("class").split()[1] == "role-tool"
    # L2 summaries and snapshots with their seq ranges
    page.locator("#l2-table").wait_for()
    assert page.locator("#l2-table tbody tr").count() == len(memory["l2"])
    assert page.locator("#snapshot-table tbody tr").count() == memory["snapshot_count"] >= 1

    # actions: promote two swap messages, see them in the bar, clear them
    page.fill("#promote-seqs", "1-2")
    page.click("#promote")
    page.locator("#action-status", has_text="promoted 1, 2").wait_for()
    page.locator("#layer-bar .seg-promoted").wait_for()
    with console_tenant.client(AGENT) as c:
        ctx = c.post(f"/v1/sessions/{layered}/context", json={"format": "raw"}).json()
        promoted = c.get(f"/v1/sessions/{layered}/memory").json()["promoted_seqs"]
    assert ctx["tokens"]["promoted"] > 0 and {1, 2} <= set(promoted)  # with seq 2's result
    expect_text(
        page.locator('#layer-table tr[data-layer="promoted"] .tokens'),
        str(ctx["tokens"]["promoted"]),
    )
    page.click("#clear-promoted")
    page.locator("#action-status", has_text=f"cleared {len(promoted)} promoted").wait_for()
    page.click("#compress")
    page.locator("#action-status", has_text="compressed").wait_for()
    # the rendered context, in the three formats
    page.click("#format-openai")
    page.locator("#rendered-json", has_text='"format": "openai"').wait_for()
    page.click("#format-raw")
    page.locator("#rendered-json", has_text='"layers"').wait_for()


def test_search_and_follow_a_hit(page: Any, server: str, console_tenant: Tenant, layered: str):
    sign_in(
        page, server, console_tenant.service_key, f"#/search?q=rows&scope=session&session={layered}"
    )
    hit = page.locator("#search-results .hit").first
    hit.wait_for()
    assert hit.locator("mark").first.text_content() == "rows"
    assert "BM25" in hit.locator(".score").text_content()
    seq = int(hit.get_attribute("data-seq"))
    hit.locator(".hit-link").click()
    page.wait_for_url(re.compile(rf"#/session/{layered}\?seq={seq}$"))
    focused = page.locator(f"#msg-{seq}")
    focused.wait_for()
    assert "focus" in focused.get_attribute("class").split()
    assert focused.is_visible()
    # the tenant scope finds it too
    page.goto(f"{server}/console#/search?q=rows&scope=tenant")
    page.locator("#search-results .hit").first.wait_for()
    # first use with a service key that acts as no agent: the form's defaults search (the
    # tenant's sessions), no `agent_required`
    page.goto(f"{server}/console#/search")
    assert page.locator("#search-scope").input_value() == "tenant"
    page.fill("#search-query", "rows")
    page.click("#search-form button[type=submit]")
    page.locator("#search-results .hit").first.wait_for()
    assert not page.locator("#search-results .error").count()


def test_shared_memory_updates_live(page: Any, server: str, console_tenant: Tenant):
    with console_tenant.client(AGENT) as c:
        first = c.put("/v1/shared-memory/global/plan", json={"value": {"step": 1}}).json()
        sign_in(page, server, console_tenant.service_key, "#/shared?ns=global")
        row = page.locator('#sm-keys tr[data-key="plan"]')
        expect_text(row.locator(".version"), str(first["version"]))
        row.locator(".key-link").click()
        page.locator("#sm-value", has_text='"step": 1').wait_for()
        page.locator("#sm-live", has_text="live").wait_for()
        # changes through REST reach the open page through the SSE watch
        second = c.put("/v1/shared-memory/global/plan", json={"value": {"step": 2}}).json()
        assert second["version"] != first["version"]
        expect_text(row.locator(".version"), str(second["version"]))
        page.locator("#sm-value", has_text='"step": 2').wait_for()
        c.put(
            "/v1/shared-memory/global/fresh",
            json={"value": [1, 2, 3]},
            params={"ttl_seconds": 3600},
        ).raise_for_status()
        page.locator('#sm-keys tr[data-key="fresh"]').wait_for()
        c.delete("/v1/shared-memory/global/plan").raise_for_status()
        page.locator('#sm-keys tr[data-key="plan"]').wait_for(state="detached")
        assert page.locator("#sm-events li").count() >= 3


def test_agent_key_sees_only_its_own_sessions(
    page: Any, server: str, console_tenant: Tenant, layered: str
):
    key = console_tenant.agent_key("reviewer")
    with console_tenant.client(key=key) as c:
        own = c.post("/v1/sessions", json={}).json()["id"]
    sign_in(page, server, key)
    assert page.text_content("#role") == "agent"
    page.locator(f'#sessions-table tr[data-session="{own}"]').wait_for()
    agents = set(page.locator("#sessions-table td.agent").all_text_contents())
    assert agents == {"reviewer"}
    assert page.locator(f'#sessions-table tr[data-session="{layered}"]').count() == 0
    # another agent's session does not exist for this key
    page.goto(f"{server}/console#/session/{layered}")
    page.locator(".error", has_text="404").first.wait_for()
    assert page.locator("#timeline .msg").count() == 0


def test_stored_markup_is_shown_as_text_and_never_runs(
    page: Any, server: str, console_tenant: Tenant
):
    with console_tenant.client(AGENT) as c:
        sid = c.post("/v1/sessions", json={"metadata": {"note": XSS[1]}}).json()["id"]
        c.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": text} for text in XSS]},
        ).raise_for_status()
        c.put(f"/v1/shared-memory/global/{XSS[2]}", json={"value": XSS[0]}).raise_for_status()
    sign_in(page, server, console_tenant.service_key, f"#/session/{sid}")
    page.locator("#msg-3").wait_for()
    for seq, text in enumerate(XSS, start=1):
        assert page.text_content(f"#msg-{seq} .text") == text
    page.goto(f"{server}/console#/search?q=payload&scope=session&session={sid}")
    page.locator("#search-results .hit").first.wait_for()
    assert sorted(page.locator("#search-results .hit .text").all_text_contents()) == sorted(XSS)
    page.goto(f"{server}/console#/shared?ns=global")
    page.locator("#sm-keys .key-link", has_text=XSS[2]).click()
    page.locator("#sm-value").wait_for()
    page.goto(f"{server}/console#/sessions")
    page.locator(f'#sessions-table tr[data-session="{sid}"]').wait_for()
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img, main script, main svg").count() == 0


def test_console_calls_only_the_public_api(
    page: Any, server: str, console_tenant: Tenant, layered: str
):
    """Every request the pages make is a static file or a route of the OpenAPI document."""
    paths = httpx.get(f"{server}/openapi.json").json()["paths"]
    patterns = [re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$") for p in paths]
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    sign_in(page, server, console_tenant.service_key)
    for target in (
        f"#/session/{layered}",
        "#/search?q=rows&scope=agent",
        "#/shared",
        "#/knowledge?run=1",
        "#/jobs",
    ):
        page.goto(f"{server}/console{target}")
        page.wait_for_load_state("networkidle")
    assert seen
    for url in seen:
        path = httpx.URL(url).path
        assert path.startswith("/console") or any(p.match(path) for p in patterns), url


def test_admin_key_names_the_tenant(
    page: Any, server: str, settings: Any, console_tenant: Tenant, layered: str
):
    sign_in(page, server, settings.admin_key.get_secret_value())
    assert page.text_content("#role") == "admin"
    page.locator("text=Admin keys act in one tenant").wait_for()
    page.fill("#tenant-pick", console_tenant.id)
    page.press("#tenant-pick", "Enter")
    page.locator(f'#sessions-table tr[data-session="{layered}"]').wait_for()
    # the tenant is sent as X-Tenant-Id with every call, the agent as X-Agent-Id once picked
    page.fill("#agent-pick", "nobody-here")
    page.press("#agent-pick", "Enter")
    page.locator("#sessions-empty").wait_for()


def test_a_10000_message_session_pages(page: Any, server: str, console_tenant: Tenant):
    """The timeline holds one page of messages, whichever part of a long session is shown."""
    with console_tenant.client("archivist") as c:
        sid = long_session(c, 10_000)
    sign_in(page, server, console_tenant.service_key, f"#/session/{sid}")
    expect_text(page.locator("#timeline-range"), "messages 9,901–10,000 of 10,000")
    assert page.locator("#timeline .msg").count() == 100
    page.fill("#goto-seq", "5000")
    page.press("#goto-seq", "Enter")
    page.locator("#msg-5000.focus").wait_for()
    assert page.locator("#timeline .msg").count() == 100
    page.click("#older")
    expect_text(page.locator("#timeline-range"), "messages 4,850–4,949 of 10,000")
    page.click("#first-page")
    page.locator("#msg-1").wait_for()
    assert page.locator("#timeline .msg").count() == 100
    page.click("#last-page")
    page.locator("#msg-10000").wait_for()


def test_knowledge_items_by_scope_and_filter(page: Any, server: str, console_tenant: Tenant):
    with console_tenant.client(AGENT) as c:
        for kind, importance in (("decision", 0.9), ("note", 0.2)):
            c.post(
                "/v1/memory-items",
                json={
                    "scope": "project/console",
                    "kind": kind,
                    "importance": importance,
                    "text": f"a {kind} of the console project",
                },
            ).raise_for_status()
    sign_in(page, server, console_tenant.service_key, "#/knowledge?scope=project/console")
    page.locator("#k-table tbody tr[data-id]").first.wait_for()
    assert page.locator("#k-table tbody tr[data-id]").count() == 2
    page.fill("#k-filters", '{"importance": {"$gte": 0.5}}')
    page.click("#k-form button[type=submit]")
    expect_text(page.locator("#k-table tbody tr[data-id] td:nth-child(2)"), "decision")


def test_jobs_page_lists_the_tenants_jobs_and_the_queue(
    page: Any, server: str, console_tenant: Tenant, layered: str
):
    """The jobs of GET /v1/jobs, row for row, with the queue's depth and the worker state."""
    with console_tenant.client(AGENT) as c:
        listed = c.get("/v1/jobs", params={"limit": 50}).json()
    assert listed["items"]
    sign_in(page, server, console_tenant.service_key, "#/jobs")
    page.locator("#jobs-table tbody tr").first.wait_for()
    rows = [
        (
            tr.get_attribute("data-session"),
            tr.get_attribute("data-kind"),
            tr.locator(".badge").text_content(),
        )
        for tr in page.locator("#jobs-table tbody tr").all()
    ]
    assert rows == [(j["session_id"], j["kind"], j["status"]) for j in listed["items"]]
    assert int(page.text_content("#queue-depth").replace(",", "")) >= 0
    assert page.locator("#worker-alive .badge").count() == 1
    page.select_option("#jobs-status", "failed")
    page.locator("#jobs-empty, #jobs-table tbody tr.job-failed").first.wait_for()
    assert page.locator("#jobs-table tbody tr.job-succeeded").count() == 0


def test_the_sign_in_page_shows_no_navigation(page: Any, server: str, console_tenant: Tenant):
    """The tabs need a key: hidden on the sign-in page (a `display: flex` rule must not beat
    `hidden`), shown once signed in, hidden again after signing out."""
    page.goto(f"{server}/console#/sessions")
    page.locator("#key").wait_for()
    assert page.locator("#nav").is_hidden()
    assert page.locator("#nav a").first.is_hidden()
    page.fill("#key", console_tenant.service_key)
    page.click("#signin-button")
    page.wait_for_selector("#role")
    assert page.locator("#nav").is_visible()
    assert page.locator('#nav a[data-page="users"]').is_visible()
    page.click("#signout")
    page.locator("#key").wait_for()
    assert page.locator("#nav").is_hidden()


def test_a_session_header_names_its_user_and_no_metadata_shows_nothing(
    page: Any, server: str, console_tenant: Tenant
):
    """The header of a session: its agent and its user (a link to the user's page); no
    metadata prints nothing (it printed `null`), some prints it as JSON."""
    with console_tenant.client(AGENT) as c:
        bare = c.post("/v1/sessions", json={"user_id": "user-7"}).json()
        tagged = c.post("/v1/sessions", json={"metadata": {"ticket": "OPS-9"}}).json()
    assert bare["metadata"] in ({}, None) and bare["user_id"] == "user-7"
    sign_in(page, server, console_tenant.service_key, f"#/session/{bare['id']}")
    page.locator("#session-agent").wait_for()
    head = page.locator("#page-session > div").first
    assert "null" not in head.text_content()
    assert page.locator("#session-metadata").count() == 0
    assert page.text_content("#session-user") == "user-7"
    page.click("#session-user")
    page.wait_for_url(re.compile(r"#/user/user-7$"))
    page.locator("#user-title").wait_for()

    page.goto(f"{server}/console#/session/{tagged['id']}")
    page.locator("#session-metadata").wait_for()
    assert '"ticket": "OPS-9"' in page.text_content("#session-metadata")
    assert page.locator("#session-user").count() == 0
    assert "null" not in page.locator("#page-session > div").first.text_content()


def test_an_unknown_address_says_not_found(page: Any, server: str, console_tenant: Tenant):
    """An address the console has no page for shows a not-found view naming it (not the
    sessions list in its place), with a way back."""
    sign_in(page, server, console_tenant.service_key, "#/sesions/typo")
    page.locator("#page-not-found").wait_for()
    assert page.text_content("#not-found-path") == "#/sesions/typo"
    assert page.locator("#sessions-table").count() == 0
    assert page.locator("#nav a.active").count() == 0
    page.click("#page-not-found a[href='#/sessions']")
    page.locator("#page-sessions").wait_for()
