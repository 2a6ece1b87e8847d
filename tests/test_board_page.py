"""The board page at /board, driven in a real browser (Debian's Chromium via Playwright).

Notes are written through MCP; the page must show them, pick up a new write in its change
feed without a reload, keep a reader to its topics, never put the token in a URL, and show
attacker-written content as text. Screenshots at 1280x800 and at phone width are saved
(to $BOARD_SCREENSHOTS when set, else the test's temporary directory).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import GatewayProcess, admin_token, agent_token, call, mcp_client

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.gateway.page._routes import static_files

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = "/usr/bin/chromium"
XSS_DIGEST = '<script>window.__xss = "digest"</script>'
XSS_BODY = "<img src=x onerror=\"window.__xss = 'body'\"><b>not bold</b>"

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium); CI installs it",
)


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        await chromium.close()


def addr(ws: str, rest: str) -> str:
    return f"bb://{ws}/{rest}"


async def open_board(
    browser: object, url: str, token: str, width: int = 1280, height: int = 800, query: str = ""
):  # type: ignore[no-untyped-def]
    context = await browser.new_context(viewport={"width": width, "height": height})  # type: ignore[attr-defined]
    page = await context.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(url + "/board" + query)
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await page.wait_for_selector("#topics button")
    return context, page, requested, errors


async def seed(url: str, token: str, ws: str) -> None:
    async with mcp_client(url, token) as client:
        await call(
            client, "update_state", uri=addr(ws, "facts/old"), digest="The old finding.", body="was"
        )
        await call(
            client,
            "update_state",
            uri=addr(ws, "facts/new"),
            digest="The new finding.",
            body="is",
            sources=[addr(ws, "facts/old")],
        )
        await call(
            client, "update_state", uri=addr(ws, "facts/evil"), digest=XSS_DIGEST, body=XSS_BODY
        )
        await call(
            client,
            "link_state",
            src=addr(ws, "facts/new"),
            rel="supersedes",
            dst=[addr(ws, "facts/old")],
        )
        await call(
            client, "update_state", uri=addr(ws, "secret/plan"), digest="Hidden plan.", body="x"
        )


async def run_in_page(page: Any, module: str, function: str, *args: Any) -> Any:
    """Calls a function one of the page's modules exports: the instance the page runs, since a
    module is evaluated once per page whoever imports it."""
    return await page.evaluate(
        "async ([module, name, args]) => (await import(module))[name](...args)",
        [f"/board/static/{module}", function, list(args)],
    )


def screenshot_dir(tmp_path: Path) -> Path:
    target = Path(os.environ.get("BOARD_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


async def test_the_page_is_served_with_a_strict_content_security_policy(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        page = await http.get(gateway.url + "/board")
        script = await http.get(gateway.url + "/board/static/board.js")
        unauthenticated = await http.get(gateway.url + "/board/api/topics")
        preloaded = re.findall(
            r'<link rel="modulepreload" href="/board/static/([^"]+)">', page.text
        )
        modules = {name: await http.get(f"{gateway.url}/board/static/{name}") for name in preloaded}
        # Only the package's scripts, styles and images: not the page's source, nothing outside.
        not_served = [
            (await http.get(f"{gateway.url}/board/static/{name}")).status_code
            for name in ("index.html", "modules/missing.js", "modules/%2E%2E/board.js")
        ]
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    # Nothing inline for the policy to refuse: scripts are files, no on* handlers.
    assert re.search(r"<script(?![^>]*\bsrc=)", page.text) is None
    assert re.search(r"\son[a-z]+=", page.text) is None
    assert script.headers["content-type"].startswith("text/javascript")
    assert unauthenticated.status_code == 401
    # The script is modules (module scripts from 'self' are all the policy allows), each
    # preloaded so that the browser fetches them at once, not one import after another.
    assert '<script type="module" src="/board/static/board.js"></script>' in page.text
    in_the_package = {name for name in static_files() if name.startswith("modules/")}
    assert set(modules) == in_the_package and len(in_the_package) >= 6
    for name, module in modules.items():
        assert module.status_code == 200, name
        assert module.headers["content-type"].startswith("text/javascript"), name
    assert not_served == [404, 404, 404]


async def test_the_board_shows_notes_graph_feed_and_escapes_content(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object, tmp_path: Path
) -> None:
    token = admin_token(issuer, workspace)
    await seed(gateway.mcp_url, token, workspace)
    context, page, requested, errors = await open_board(browser, gateway.url, token)
    topics = await page.locator("#topics button").all_inner_texts()
    assert topics == ["facts (3)", "secret (1)"]
    await page.click("text=facts (3)")
    await page.wait_for_selector("#notes tbody tr")
    # Addresses are shown relative to the topic, the whole address on hover.
    rows = await page.locator("#notes tbody tr td.addr").all_inner_texts()
    assert sorted(rows) == ["evil", "new", "old"]
    assert await page.get_attribute("#notes tbody button:text-is('old')", "title") == addr(
        workspace, "facts/old"
    )
    # Sorting by keyboard: focus the Address column's button and press Enter.
    await page.focus("#notes th[data-key=uri] button")
    await page.keyboard.press("Enter")
    assert await page.get_attribute("#notes th[data-key=uri]", "aria-sort") == "ascending"
    assert await page.locator("#notes tbody tr td.addr").all_inner_texts() == sorted(rows)
    # Attacker-written digest and body are shown as text, and run nothing.
    await page.click(f"#notes button[title='{addr(workspace, 'facts/evil')}']")
    await page.wait_for_selector("#note-panel:not([hidden])")
    assert await page.inner_text("#note-content") == XSS_BODY
    assert XSS_DIGEST in await page.inner_text("#notes tbody")
    assert await page.evaluate("window.__xss") is None
    assert await page.locator("#note-content img, #note-content b, #notes script").count() == 0
    # The superseded note: warning, its link drawn in the graph, opened from the keyboard.
    await page.focus(f"#notes tbody button[title='{addr(workspace, 'facts/old')}']")
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"#note-title:text-is('{addr(workspace, 'facts/old')}')")
    warnings = await page.locator("#note-warnings li").all_inner_texts()
    assert warnings == [
        f"{addr(workspace, 'facts/old')} is superseded by {addr(workspace, 'facts/new')}"
    ]
    assert await page.locator("#note-graph .edge.bad").count() == 1
    assert await page.locator("#note-graph .node").count() == 2
    # The audit tail for an admin.
    assert await page.locator("#audit tbody tr").count() > 0
    # A write appears in the feed without a reload.
    await page.wait_for_selector("#feed-status[data-live=true]")
    await page.evaluate("window.__same_page = true")
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(
            client, "update_state", uri=addr(workspace, "facts/fresh"), digest="Fresh.", body=""
        )
    await page.wait_for_selector(
        f"#feed li button[title='{addr(workspace, 'facts/fresh')}']", timeout=10_000
    )
    await page.wait_for_selector("text=facts (4)", timeout=10_000)
    assert await page.evaluate("window.__same_page") is True
    shots = screenshot_dir(tmp_path)
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=str(shots / "board-1280x800.png"))
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.screenshot(path=str(shots / "board-phone.png"), full_page=True)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    # The token went in headers only.
    assert requested and not [u for u in requested if token in u]
    assert errors == []
    await context.close()


async def test_a_reader_sees_only_its_topics_in_the_list_and_the_feed(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    writer = agent_token(issuer, workspace)
    await seed(gateway.mcp_url, writer, workspace)
    reader = agent_token(issuer, workspace, read=["facts"], write=[], caps=["board_read"])
    context, page, requested, errors = await open_board(browser, gateway.url, reader)
    assert await page.locator("#topics button").all_inner_texts() == ["facts (3)"]
    assert await page.is_hidden("#audit-panel")
    await page.wait_for_selector("#feed-status[data-live=true]")
    async with mcp_client(gateway.mcp_url, writer) as client:
        await call(
            client, "update_state", uri=addr(workspace, "secret/next"), digest="Hidden.", body=""
        )
        await call(
            client, "update_state", uri=addr(workspace, "facts/next"), digest="Seen.", body=""
        )
    await page.wait_for_selector(
        f"#feed li button[title='{addr(workspace, 'facts/next')}']", timeout=10_000
    )
    feed = await page.inner_text("#feed")
    assert "secret" not in feed
    assert "secret" not in await page.content()
    assert errors == []
    # The API refuses a secret note as get_state does: as that item, nothing of it shown.
    refused = await page.evaluate(
        """async (uri) => {
            const r = await fetch('/board/api/call', {method: 'POST', headers: {
              Authorization: 'Bearer ' + sessionStorage.getItem('bb-board-token'),
              'Content-Type': 'application/json'},
              body: JSON.stringify({tool: 'get_state', arguments: {uris: [uri]}})});
            return [r.status, (await r.json()).items];
        }""",
        addr(workspace, "secret/plan"),
    )
    assert refused == [200, [{"uri": addr(workspace, "secret/plan"), "error": "forbidden"}]]
    # Opened by its address, the page says so without a word of the note.
    await run_in_page(page, "modules/notes.js", "openNote", addr(workspace, "secret/plan"))
    await page.wait_for_selector("#note-digest:has-text('may not read')")
    assert "Hidden" not in await page.inner_text("#note-panel")
    assert not [u for u in requested if reader in u]
    await context.close()


async def test_the_notes_table_shows_each_notes_content_bytes_for_text_tables_and_offloaded(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = agent_token(issuer, workspace)
    notes = {
        "text": {"body": "héllo wörld"},  # bytes, not characters: 13, not 11
        "grid": {"columns": ["name", "n"], "rows": [["ä", "1"], ["b", "22"]]},
        "big": {"body": "offloaded line\n" * 1500},  # over the offload threshold
        "bare": {"body": ""},  # a digest with no content
    }
    async with mcp_client(gateway.mcp_url, token) as client:
        for key, content in notes.items():
            err, body = await call(
                client, "update_state", uri=addr(workspace, f"sizes/{key}"), digest="D.", **content
            )
            assert not err, body
        err, read = await call(
            client,
            "get_state",
            uris=[addr(workspace, f"sizes/{k}") for k in notes],
            mode="full",
            budget_tokens=100_000,
        )
        assert not err, read

    # What a reader gets in full, in UTF-8 bytes: a table's as the TSV it is stored as.
    def stored(item: dict[str, Any]) -> str:
        if "rows" in item:
            return "\n".join("\t".join(r) for r in [item["columns"], *item["rows"]])
        return str(item.get("body") or "")

    expected = {item["uri"]: str(len(stored(item).encode())) for item in read["items"]}
    assert expected[addr(workspace, "sizes/text")] == "13"
    assert expected[addr(workspace, "sizes/bare")] == "0"
    context, page, _requested, errors = await open_board(browser, gateway.url, token)
    header = page.locator("#notes th[data-key=size]")
    assert await header.inner_text() == "Bytes"
    assert "bytes" in (await header.get_attribute("title") or "").lower()
    await page.click("text=sizes (4)")
    await page.wait_for_selector("#notes tbody tr")
    shown = {}
    for row in await page.locator("#notes tbody tr").all():
        cells = await row.locator("td").all_inner_texts()
        shown[await row.locator("td.addr button").get_attribute("title")] = cells[5]
    assert shown == expected
    assert errors == []
    await context.close()


async def test_more_pages_of_a_topic_are_loaded_with_the_more_button_from_the_keyboard(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object, tmp_path: Path
) -> None:
    token = agent_token(issuer, workspace)
    expected = sorted(addr(workspace, f"many/n{i}") for i in range(5))
    async with mcp_client(gateway.mcp_url, token) as client:
        for uri in expected:
            err, body = await call(client, "update_state", uri=uri, digest="D.", body="")
            assert not err, body
    # Two notes a page (the page's own default is list_keys' largest page, 200).
    context, page, _requested, errors = await open_board(
        browser, gateway.url, token, query="?page_size=2"
    )
    await page.click("text=many (5)")
    await page.wait_for_selector("#notes tbody tr")
    rows = page.locator("#notes tbody tr td.addr")
    more = page.locator("#notes-more")
    assert await rows.count() == 2
    await page.screenshot(path=str(screenshot_dir(tmp_path) / "board-more.png"))
    for shown in (4, 5):
        assert await more.is_visible()
        await more.focus()
        await page.keyboard.press("Enter")
        await page.wait_for_function(
            "n => document.querySelectorAll('#notes tbody tr').length === n", arg=shown
        )
    shown = [await b.get_attribute("title") for b in await rows.locator("button").all()]
    assert sorted(shown) == expected  # each note once
    assert await more.is_hidden()
    assert errors == []
    await context.close()


async def test_a_note_shows_its_versions_and_the_changes_between_any_two(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object, tmp_path: Path
) -> None:
    token = admin_token(issuer, workspace)
    plan, table = addr(workspace, "plans/q3"), addr(workspace, "plans/budget")
    async with mcp_client(gateway.mcp_url, token) as client:
        for body in ("ship A\nthen B", "ship A\nthen C\nand D", "ship E\nthen C\nand D"):
            await call(client, "update_state", uri=plan, digest="The plan.", body=body)
        for rows in (
            [["rent", "10"], ["food", "5"]],
            [["rent", "12"], ["food", "5"], ["fun", "1"]],
        ):
            await call(
                client,
                "update_state",
                uri=table,
                digest="Budget.",
                columns=["item", "eur"],
                rows=rows,
            )
    context, page, _requested, errors = await open_board(browser, gateway.url, token)
    try:
        await page.click("text=plans (2)")
        await page.click(f"#notes button[title='{plan}']")
        await page.wait_for_selector("#versions-status:text-is('3 versions')")
        cells = await page.locator("#versions tbody tr td:nth-child(3)").all_text_contents()
        assert cells == ["3", "2", "1"]
        # By default the newest against the one before it.
        await page.click("#compare")
        await page.wait_for_selector("#diff li")
        diff = [
            (await li.get_attribute("class"), await li.text_content())
            for li in await page.locator("#diff li").all()
        ]
        assert diff == [("removed", "ship A"), ("added", "ship E"), ("same", "then C"),
                        ("same", "and D")]  # fmt: skip
        await page.check(f"input[name=old][value='{plan}@1']")
        await page.click("#compare")
        await page.wait_for_selector("#diff li.removed:text-is('then B')")
        await page.click(f"#notes button[title='{table}']")
        await page.wait_for_selector("#versions-status:text-is('2 versions')")
        await page.click("#compare")
        await page.wait_for_selector("#diff li.cell")
        changes = await page.locator("#diff li").all_text_contents()
        assert changes == ["row 1, eur: 10 → 12", "row 3: fun | 1"]
        assert errors == []
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "board-versions.png"))
    finally:
        await context.close()


async def test_the_page_says_who_is_signed_in_searches_and_shows_tables_and_times_plainly(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object, tmp_path: Path
) -> None:
    writer = agent_token(issuer, workspace)
    await seed(gateway.mcp_url, writer, workspace)
    async with mcp_client(gateway.mcp_url, writer) as client:
        await call(
            client, "update_state", uri=addr(workspace, "facts/grid"), digest="Zebra counts.",
            columns=["animal", "count"], rows=[["zebra", "3"], ["<b>x</b>", "1"]],
        )  # fmt: skip
    reader = agent_token(
        issuer, workspace, sub="reader-7", read=["facts"], write=[], caps=["board_read"]
    )
    context, page, _requested, errors = await open_board(browser, gateway.url, reader)
    try:
        who = await page.inner_text("#who")
        assert f"Signed in as reader-7 to workspace {workspace}" in who
        assert "reads facts; writes none; may board_read" in who
        assert "expires in 10 minutes" in who
        assert await page.is_visible("#notes-prompt")
        # Search: hits of the readable topic only, digests as text.
        await page.fill("#search", "zebra")
        await page.press("#search", "Enter")
        await page.wait_for_selector("#search-hits li button")
        hits = [
            await b.get_attribute("title") for b in await page.locator("#search-hits button").all()
        ]
        assert hits == [addr(workspace, "facts/grid")]
        assert await page.inner_text("#search-title") == "1 result for zebra"
        await page.fill("#search", "hidden plan")
        await page.press("#search", "Enter")
        await page.wait_for_selector("#search-hits li.muted")
        assert "secret" not in await page.content()
        # A table note as a table, its cells as text.
        await page.click("text=facts (4)")
        assert await page.is_hidden("#notes-prompt")
        await page.click(f"#notes button[title='{addr(workspace, 'facts/grid')}']")
        await page.wait_for_selector("#note-table table")
        cells = await page.locator("#note-table td").all_inner_texts()
        assert cells == ["zebra", "3", "<b>x</b>", "1"]
        assert await page.locator("#note-table b").count() == 0
        assert await page.is_hidden("#note-content")
        # One time convention: how long ago, the exact UTC time on hover.
        updated = page.locator("#notes tbody time").first
        assert await updated.inner_text() == "just now"
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(UTC\)", await updated.get_attribute("title") or ""
        )
        # A phone: nothing scrolls sideways, the list of notes included.
        await page.set_viewport_size({"width": 390, "height": 844})
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        width = await page.evaluate("document.querySelector('#notes').scrollWidth")
        assert width <= 390
        await page.screenshot(
            path=str(screenshot_dir(tmp_path) / "board-phone-note.png"), full_page=True
        )
        assert errors == []
    finally:
        await context.close()


async def test_the_page_follows_a_dark_colour_scheme(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    context = await browser.new_context(color_scheme="dark")  # type: ignore[attr-defined]
    try:
        page = await context.new_page()
        await page.goto(gateway.url + "/board")
        background = await page.evaluate(
            "getComputedStyle(document.documentElement).backgroundColor"
        )
        assert background == "rgb(21, 24, 28)", background
    finally:
        await context.close()


async def test_activity_shows_writes_per_minute_by_topic_and_author_the_reader_may_see(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    for sub, topic, count in (("alice", "facts", 3), ("bob", "facts", 1), ("carol", "secret", 2)):
        token = agent_token(issuer, workspace, sub=sub)
        async with mcp_client(gateway.mcp_url, token) as client:
            for i in range(count):
                await call(
                    client,
                    "update_state",
                    uri=addr(workspace, f"{topic}/{sub}{i}"),
                    digest="D.",
                    body="",
                )
    reader = agent_token(issuer, workspace, sub="reader", read=["facts"], write=[])
    context, page, _requested, errors = await open_board(browser, gateway.url, reader)
    try:
        await page.wait_for_selector("#activity-topics li svg")
        topics = await page.locator("#activity-topics .name").all_inner_texts()
        authors = await page.locator("#activity-authors .name").all_inner_texts()
        assert topics == ["facts (4)"]
        assert authors == ["alice (3)", "bob (1)"]  # carol wrote only where the reader cannot
        label = await page.locator("#activity-topics svg").first.get_attribute("aria-label")
        assert label == "topic facts: 4 writes in the last hour, at most 4 in a minute"
        assert "secret" not in await page.content() and "carol" not in await page.content()
        assert await page.is_hidden("#activity-refusals")  # an admin's, from the audit
        assert errors == []
    finally:
        await context.close()


async def test_the_link_graph_draws_each_note_once_with_readable_labels_on_a_phone(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = agent_token(issuer, workspace)
    hub, spec = addr(workspace, "g/hub"), addr(workspace, "g/spec")
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(client, "update_state", uri=spec, digest="The spec.", body="")
        await call(client, "update_state", uri=hub, digest="The hub.", body="", sources=[spec])
        for rel in ("cites", "depends_on"):
            await call(client, "link_state", src=hub, rel=rel, dst=[spec])
    context, page, _requested, errors = await open_board(
        browser, gateway.url, token, width=390, height=844
    )
    try:
        await page.click("text=g (2)")
        await page.click(f"#notes button[title='{hub}']")
        await page.wait_for_selector("#note-graph .node[role=button]")
        neighbours = page.locator("#note-graph .node[role=button]")
        assert await neighbours.count() == 1  # one node for the note, its relations listed
        name = await neighbours.first.get_attribute("aria-label")
        assert name == f"g/spec cites, depends_on, source: open {spec}"
        # The drawing is as wide as its box: its text keeps a readable size on a phone.
        scale = await page.evaluate(
            "(g => g.getBoundingClientRect().width / g.viewBox.baseVal.width)"
            "(document.querySelector('#note-graph'))"
        )
        font = await page.evaluate(
            "parseFloat(getComputedStyle("
            "document.querySelector('#note-graph .node text')).fontSize)"
        )
        assert font * scale >= 10, (font, scale)
        await neighbours.first.focus()
        await page.keyboard.press("Enter")
        await page.wait_for_selector(f"#note-title:text-is('{spec}')")
        assert errors == []
    finally:
        await context.close()


async def test_an_admin_issues_revokes_and_sets_retention_from_the_page_and_a_reader_cannot(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace)
    for i in range(25):  # more audit records than a page
        async with mcp_client(
            gateway.mcp_url, agent_token(issuer, workspace, sub=f"w{i % 3}")
        ) as c:
            await call(c, "update_state", uri=addr(workspace, f"facts/n{i}"), digest="D.", body="")
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#admin-panel:not([hidden])")
        # Issue a scoped token: shown once, with a set-up line, and it works as scoped.
        await page.fill("#issue-sub", "<img src=x onerror=window.__xss=1>")
        await page.click("#issue-form button[type=submit]")
        await page.wait_for_selector("#issue-status:has-text('Not issued')")
        await page.fill("#issue-sub", "helper")
        await page.fill("#issue-read", "facts")
        await page.click("#issue-form button[type=submit]")
        # The form offers at most the admin's own token's remaining life (10 minutes here).
        offered = re.fullmatch(r"(\d+)m", await page.input_value("#issue-ttl"))
        assert offered and int(offered.group(1)) <= 10
        await page.wait_for_selector("#issued:not([hidden])")
        issued = await page.input_value("#issued-token")
        snippet = await page.inner_text("#issued-snippet")
        assert issued in snippet and snippet.startswith("claude mcp add --transport http")
        async with mcp_client(gateway.mcp_url, issued) as client:
            err, body = await call(client, "list_keys", topic="facts")
            assert not err and body["items"]
            err, body = await call(
                client, "update_state", uri=addr(workspace, "facts/x"), digest="D.", body=""
            )
            assert err and body["error"]["code"] == "forbidden"  # board_read only, writes nothing
        # The token just issued is in the list; revoking its subject takes two clicks.
        button = page.get_by_role("button", name="Revoke every token of helper", exact=True)
        await button.click()
        await button.click()
        await page.wait_for_selector("#revoke-status:text-is('Revoked every token of helper.')")
        async with mcp_client(gateway.mcp_url, issued) as c:
            err, body = await call(c, "list_keys", topic="facts")
            assert err and "revoked" in body["error"]["message"], body
        # The helper's refused write above is among the hour's refusals an admin sees.
        await run_in_page(page, "modules/activity.js", "loadActivity")
        await page.wait_for_selector("#activity-refusals:has-text('forbidden')")
        assert "1 forbidden" in await page.inner_text("#activity-refusals")
        # Retention for a topic.
        await page.fill("#retention-topic", "facts")
        await page.fill("#retention-age", "7d")
        await page.click("#retention-form button[type=submit]")
        await page.wait_for_selector("#retention-now:has-text('facts: 7d')")
        # The audit tail: collapsed, paged by 20.
        await page.click("#audit-details summary")
        assert await page.locator("#audit tbody tr").count() == 20
        await page.click("#audit-more")
        assert await page.locator("#audit tbody tr").count() > 20
        assert await page.evaluate("window.__xss") is None
        # The refused issue above is the one failed request (a 400 the browser logs).
        assert [e for e in errors if "the server responded with a status of 400" not in e] == []
    finally:
        await context.close()
    reader = agent_token(issuer, workspace, sub="reader", read=["facts"], write=[])
    context, page, _requested, errors = await open_board(browser, gateway.url, reader)
    try:
        assert await page.is_hidden("#admin-panel") and await page.is_hidden("#audit-panel")
        assert await page.locator("#tokens tbody tr").count() == 0
    finally:
        await context.close()


async def test_a_topics_link_graph_draws_each_note_once_and_opens_notes_by_keyboard(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = agent_token(issuer, workspace)
    a, b, c = (addr(workspace, f"web/{n}") for n in ("a", "b", "c"))
    async with mcp_client(gateway.mcp_url, token) as client:
        for uri in (a, b, c):
            await call(client, "update_state", uri=uri, digest="D.", body="")
        await call(client, "update_state", uri=addr(workspace, "elsewhere/x"), digest="D.", body="")
        await call(client, "link_state", src=a, rel="cites", dst=[b, c])
        await call(client, "link_state", src=b, rel="contradicts", dst=[c])
        await call(client, "link_state", src=c, rel="refines", dst=[addr(workspace, "elsewhere/x")])
    context, page, _requested, errors = await open_board(browser, gateway.url, token)
    try:
        await page.click("text=web (3)")
        await page.wait_for_selector("#notes tbody tr")
        await page.click("#topic-graph-details summary")
        await page.wait_for_selector("#topic-graph .node")
        assert await page.locator("#topic-graph .node").count() == 3
        assert await page.locator("#topic-graph .edge").count() == 3
        assert await page.locator("#topic-graph .edge.bad").count() == 1
        note = await page.inner_text("#topic-graph-note")
        assert note == "1 link to notes of other topics not drawn."
        node = page.locator(f"#topic-graph .node[aria-label$='open {c}']")
        assert await node.get_attribute("aria-label") == f"c: 2 links, open {c}"
        await node.focus()
        await page.keyboard.press("Enter")
        await page.wait_for_selector(f"#note-title:text-is('{c}')")
        assert errors == []
    finally:
        await context.close()


async def test_a_link_is_withdrawn_from_the_page_by_a_token_that_may_and_not_by_a_reader(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = admin_token(issuer, workspace)
    await seed(gateway.mcp_url, token, workspace)
    old, new = addr(workspace, "facts/old"), addr(workspace, "facts/new")
    warning = f"{old} is superseded by {new}"

    # A reader may not withdraw it: the refusal is shown, and the link stays.
    reader = agent_token(issuer, workspace, sub="reader", read=["facts"], write=[])
    context, page, _, errors = await open_board(browser, gateway.url, reader)
    await page.click("text=facts (3)")
    await page.click(f"#notes button[title='{old}']")
    await page.wait_for_selector(f"#note-title:text-is('{old}')")
    withdraw = page.locator(
        f"#note-links button[aria-label='withdraw the supersedes link from {new}']"
    )
    await withdraw.click()
    assert await withdraw.inner_text() == "Withdraw this link?"
    await withdraw.click()
    await page.wait_for_selector("#status.error")
    assert "forbidden" in await page.inner_text("#status")
    assert await page.locator("#note-warnings li").all_inner_texts() == [warning]
    # The browser logs the refused request itself; nothing else went wrong.
    assert [e for e in errors if "status of 403" not in e] == []
    await context.close()

    # The admin, who could have made it, withdraws it after confirming; the warning goes.
    context, page, _, errors = await open_board(browser, gateway.url, token)
    await page.click("text=facts (3)")
    await page.click(f"#notes button[title='{old}']")
    await page.wait_for_selector(f"#note-title:text-is('{old}')")
    assert await page.locator("#note-warnings li").all_inner_texts() == [warning]
    withdraw = page.locator(
        f"#note-links button[aria-label='withdraw the supersedes link from {new}']"
    )
    await withdraw.click()
    await withdraw.click()
    await page.wait_for_selector("#status:text('Withdrew the supersedes link')")
    await page.wait_for_selector("#note-links li", state="detached")
    assert await page.locator("#note-warnings li").count() == 0
    assert errors == []
    await context.close()
    async with mcp_client(gateway.mcp_url, token) as client:
        _, read = await call(client, "get_state", uris=[old], mode="full")
    assert "warnings" not in read and "links" not in read["items"][0]


# The token inventory in the admin panel: tokens are issued through the admin API, so that
# they are on record as every token the board issues is.

SCOUT = {"read": ["research"], "write": [], "caps": ["board_read"], "ttl_seconds": 600}
PAGE_ADMIN = {
    "read": ["*"],
    "write": ["*"],
    "caps": ["admin", "board_read", "board_write", "file_read"],
    "ttl_seconds": 1800,
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def issued_through_the_api(url: str, admin: str, sub: str, **body: Any) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            url + "/admin/tokens", json={"sub": sub, **body}, headers=bearer(admin)
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def inventory(url: str, admin: str) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        response = await http.get(url + "/admin/tokens", headers=bearer(admin))
    assert response.status_code == 200, response.text
    return {t["id"]: t for t in response.json()["tokens"]}


async def refused(url: str, token: str) -> bool:
    async with mcp_client(url, token) as client:
        err, body = await call(client, "list_keys", topic="research")
    return err and "revoked" in body["error"]["message"]


async def a_note(url: str, token: str, ws: str) -> None:
    """A topic to show: the page is signed in once it lists one."""
    async with mcp_client(url, token) as client:
        err, body = await call(
            client, "update_state", uri=addr(ws, "facts/a"), digest="D.", body=""
        )
    assert not err, body


def not_found_logged(errors: list[str]) -> list[str]:
    """The page's console errors but the 404s the browser logs for refused revocations."""
    return [e for e in errors if "the server responded with a status of 404" not in e]


async def test_the_admin_panel_lists_every_issued_token_and_revokes_one_or_a_subject_from_it(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object, tmp_path: Path
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    await a_note(gateway.mcp_url, admin, workspace)
    scout = await issued_through_the_api(gateway.url, admin, "scout", **SCOUT)
    helper = await issued_through_the_api(gateway.url, admin, "helper", **SCOUT)
    async with httpx.AsyncClient() as http:
        exchanged = await http.post(
            gateway.url + "/oauth/token",
            data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token": helper["token"],
                "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "scope": "read:research board_read",
            },
        )
    assert exchanged.status_code == 200, exchanged.text
    child = exchanged.json()["access_token"]
    assert not await refused(gateway.mcp_url, scout["token"])  # scout has been used now
    listed = await inventory(gateway.url, admin)
    child_id = next(i for i, t in listed.items() if t["parent"] == helper["id"])
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#tokens tbody tr")
        rows = {}
        for row in await page.locator("#tokens tbody tr").all():
            cells = {
                await td.get_attribute("data-label"): (await td.inner_text()).strip()
                for td in await row.locator("td[data-label]").all()
            }
            rows[await row.get_attribute("data-id")] = cells
        assert set(rows) == set(listed) == {scout["id"], helper["id"], child_id}
        assert {r["Status"] for r in rows.values()} == {"active"}
        assert rows[scout["id"]]["Subject"] == "scout"
        assert rows[scout["id"]]["Last used"] == "just now"
        assert rows[child_id]["Last used"] == "never"
        assert rows[scout["id"]]["Expires"] == "in 10 minutes"
        assert rows[child_id]["Delegated from"] == helper["id"][:8] + "…"
        assert rows[scout["id"]]["Delegated from"] == ""
        await page.locator("#tokens-section").screenshot(
            path=str(screenshot_dir(tmp_path) / "board-tokens.png")
        )
        # One token by its id: the others stay.
        await page.get_by_role("button", name=f"Revoke token {scout['id']} of scout").click()
        await page.wait_for_selector(
            f"#revoke-status:text-is('Revoked token {scout['id']} of scout.')"
        )
        await page.wait_for_selector(
            f"#tokens tr[data-id='{scout['id']}'] td[data-label=Status]:text-is('revoked')"
        )
        assert await page.get_attribute("#revoke-status", "role") == "status"
        # The revoked token offers no revoke any more.
        assert await page.locator(f"#tokens tr[data-id='{scout['id']}'] button").count() == 0
        statuses = {i: t["status"] for i, t in (await inventory(gateway.url, admin)).items()}
        assert statuses == {scout["id"]: "revoked", helper["id"]: "active", child_id: "active"}
        assert await refused(gateway.mcp_url, scout["token"])
        assert not await refused(gateway.mcp_url, helper["token"])
        # Every token of a subject: asked once, then its token and the one delegated from it
        # are refused.
        subject = page.get_by_role("button", name="Revoke every token of helper", exact=True)
        await subject.click()
        assert await subject.inner_text() == "Revoke every token of helper?"
        assert (await inventory(gateway.url, admin))[helper["id"]]["status"] == "active"
        await subject.click()
        await page.wait_for_selector("#revoke-status:text-is('Revoked every token of helper.')")
        await page.wait_for_selector(
            f"#tokens tr[data-id='{helper['id']}'] td[data-label=Status]:text-is('revoked')"
        )
        assert (await inventory(gateway.url, admin))[helper["id"]]["status"] == "revoked"
        assert await refused(gateway.mcp_url, helper["token"])
        assert await refused(gateway.mcp_url, child)
        assert errors == []
    finally:
        await context.close()


async def test_a_typed_unknown_subject_is_reported_not_found_and_revoked_only_when_forced(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    await a_note(gateway.mcp_url, admin, workspace)
    # A token made with the key, never recorded: its subject is unknown to the inventory.
    ghost = agent_token(issuer, workspace, sub="ghost")
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#admin-panel:not([hidden])")
        await page.fill("#revoke-target", "ghost")
        await page.click("#revoke-form button[type=submit]")
        await page.wait_for_selector("#revoke-status:has-text('Not revoked')")
        said = await page.inner_text("#revoke-status")
        assert "no token of subject 'ghost' is on record" in said, said
        assert "force it" in said, said  # the API's hint as well
        assert not await refused(gateway.mcp_url, ghost)
        # An unknown token id alike.
        await page.select_option("#revoke-kind", "id")
        await page.fill("#revoke-target", "f" * 32)
        await page.click("#revoke-form button[type=submit]")
        await page.wait_for_selector(f"#revoke-status:has-text(\"no token with id '{'f' * 32}'\")")
        assert (await page.inner_text("#revoke-status")).startswith("Not revoked")
        # Forced, the subject is revoked ahead of the inventory: its key-made token ends.
        await page.select_option("#revoke-kind", "sub")
        await page.fill("#revoke-target", "ghost")
        assert "revoke a subject ahead of any token" in await page.inner_text("#revoke-form")
        await page.check("#revoke-force")
        await page.click("#revoke-form button[type=submit]")
        await page.wait_for_selector("#revoke-status:text-is('Revoked every token of ghost.')")
        assert await refused(gateway.mcp_url, ghost)
        assert not_found_logged(errors) == []
    finally:
        await context.close()


async def test_revoking_the_signed_in_admins_own_token_asks_first_then_says_it_no_longer_works(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    key_admin = admin_token(issuer, workspace, ttl=3600)
    await a_note(gateway.mcp_url, key_admin, workspace)
    mine = await issued_through_the_api(gateway.url, key_admin, "page-admin", **PAGE_ADMIN)
    other = await issued_through_the_api(gateway.url, key_admin, "scout", **SCOUT)
    context, page, _requested, errors = await open_board(browser, gateway.url, mine["token"])

    async def status_of(token_id: str) -> str:
        return str((await inventory(gateway.url, key_admin))[token_id]["status"])

    try:
        await page.wait_for_selector(f"#tokens tr[data-id='{mine['id']}']")
        # Its own subject, typed: asked first, nothing revoked.
        await page.fill("#revoke-target", "page-admin")
        await page.click("#revoke-form button[type=submit]")
        await page.wait_for_selector("#revoke-status:has-text('your own token')")
        assert await status_of(mine["id"]) == "active"
        # Another token is revoked at once; the armed form is not, once its field changes.
        await page.get_by_role("button", name=f"Revoke token {other['id']} of scout").click()
        await page.wait_for_selector(
            f"#revoke-status:text-is('Revoked token {other['id']} of scout.')"
        )
        await page.fill("#revoke-target", "page-admin ")
        assert await page.inner_text("#revoke-form button[type=submit]") == "Revoke"
        # Its own token in the list: the first click asks, the second revokes.
        own = page.get_by_role(
            "button", name=f"Revoke token {mine['id']} of page-admin, your own token"
        )
        await own.click()
        assert "your own token" in (await own.inner_text()).lower()
        assert await status_of(mine["id"]) == "active"
        await own.click()
        await page.wait_for_selector("#revoke-status:has-text('no longer works')")
        assert "no longer works" in await page.inner_text("#status")
        assert await status_of(mine["id"]) == "revoked"
        async with httpx.AsyncClient() as http:
            answer = await http.get(gateway.url + "/admin/tokens", headers=bearer(mine["token"]))
        assert answer.status_code == 401, answer.text
        assert errors == []
    finally:
        await context.close()


async def test_the_boards_own_audit_subjects_are_never_offered_for_revocation(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    await a_note(gateway.mcp_url, admin, workspace)
    scout = await issued_through_the_api(gateway.url, admin, "scout", **SCOUT)
    async with mcp_client(gateway.mcp_url, scout["token"]) as client:
        await call(client, "list_keys", topic="research")
    context, page, requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#tokens tbody tr")

        # The audit tail as it is once the CLI and the retention sweep have acted.
        async def with_internal_subjects(route: Any) -> None:
            response = await route.fetch()
            body = await response.json()
            body["records"] += [
                {"at": 1, "subject": s, "tool": "delete", "outcome": "ok", "addresses": [], "ms": 1}
                for s in ("cli:root", "retention")
            ]
            await route.fulfill(response=response, json=body)

        await page.route("**/board/api/audit", with_internal_subjects)
        await run_in_page(page, "modules/admin.js", "loadAudit")
        await page.wait_for_selector("#audit td:text-is('cli:root')", state="attached")
        names = [
            (await b.get_attribute("aria-label") or await b.inner_text())
            for b in await page.locator("#admin-panel button").all()
        ]
        revokes = [n for n in names if n.lower().startswith("revoke ")]  # not the form's
        assert revokes and all("scout" in n for n in revokes), revokes
        assert not [n for n in names if "cli:root" in n or "retention" in n.lower()], names
        assert await page.locator("#subjects").count() == 0  # no list fed from the audit
        # Typed, they are refused on the page: nothing is sent.
        for internal in ("cli:root", "retention"):
            await page.fill("#revoke-target", internal)
            await page.check("#revoke-force")
            await page.click("#revoke-form button[type=submit]")
            await page.wait_for_selector(f"#revoke-status:has-text('{internal} is the board')")
        assert not [u for u in requested if u.endswith("/admin/revoke")]
        assert errors == []
    finally:
        await context.close()


async def test_an_admin_token_with_partial_topics_gets_no_admin_panel(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    async with mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as client:
        await call(client, "update_state", uri=addr(workspace, "pub/x"), digest="D.", body="")
    partial = issuer.issue(
        subject="pub-admin",
        workspace=workspace,
        read=["pub"],
        write=["pub"],
        capabilities=["admin", "board_read"],
        ttl_seconds=600,
    )
    context, page, requested, errors = await open_board(browser, gateway.url, partial)
    try:
        # Resolves once the page has done all it does at sign-in.
        await run_in_page(page, "board.js", "start")
        assert await page.is_hidden("#admin-panel") and await page.is_hidden("#audit-panel")
        assert await page.get_attribute("#status", "class") != "error"
        assert not [u for u in requested if "/admin/" in u or u.endswith("/board/api/audit")]
        assert errors == []
    finally:
        await context.close()
