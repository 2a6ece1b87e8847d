"""axe-core on every state of the board page, in a real browser: no serious or critical
violation signed out, signed in with nothing open, with a topic's notes, with a note open
(its links drawn, its versions compared, its warnings shown), with the admin's audit tail,
and at phone width."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from npm_support import installed_from_lockfile
from support import GatewayProcess, admin_token, call, mcp_client

from blackboard_mcp.auth import TokenIssuer

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = "/usr/bin/chromium"
AXE_DIR = Path(__file__).parent / "axe"

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium); CI installs it",
)


@pytest.fixture(scope="module")
def axe_source() -> str:
    modules = installed_from_lockfile(AXE_DIR, "axe-core for the accessibility tests", 300)
    return (modules / "axe-core" / "axe.min.js").read_text()


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # The page's CSP allows only its own scripts; axe is put in by the test alone.
        context = await chromium.new_context(
            bypass_csp=True, viewport={"width": 1280, "height": 800}
        )
        yield await context.new_page()
        await context.close()
        await chromium.close()


async def serious_violations(page: Any, axe: str) -> list[str]:
    await page.add_script_tag(content=axe)
    result = await page.evaluate("axe.run(document)")
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


async def test_every_state_of_the_board_page_has_no_serious_accessibility_violation(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, page: Any, axe_source: str
) -> None:
    token = admin_token(issuer, workspace)
    note, other = f"bb://{workspace}/facts/a", f"bb://{workspace}/facts/b"
    async with mcp_client(gateway.mcp_url, token) as client:
        for body in ("first", "second"):
            await call(client, "update_state", uri=note, digest="A finding.", body=body)
        await call(
            client, "update_state", uri=other, digest="A table.", columns=["k"], rows=[["v"]]
        )
        await call(client, "link_state", src=note, rel="cites", dst=[other])
    # A token on record, so that the admin panel's token list has a row and its buttons.
    async with httpx.AsyncClient() as http:
        issued = await http.post(
            gateway.url + "/admin/tokens",
            json={"sub": "scout", "read": ["facts"], "caps": ["board_read"], "ttl_seconds": 300},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert issued.status_code == 200, issued.text
    found: dict[str, list[str]] = {}
    await page.goto(gateway.url + "/board")
    found["signed out"] = await serious_violations(page, axe_source)
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await page.wait_for_selector("#topics button")
    await page.wait_for_selector("#admin-panel:not([hidden])")
    await page.wait_for_selector("#tokens tbody tr button")
    found["signed in, nothing open, admin panel"] = await serious_violations(page, axe_source)
    await page.click("#audit-details summary")
    await page.wait_for_selector("#audit tbody tr")
    found["audit tail open"] = await serious_violations(page, axe_source)
    await page.click("text=facts (2)")
    await page.wait_for_selector("#notes tbody tr")
    found["a topic's notes"] = await serious_violations(page, axe_source)
    await page.click("#topic-graph-details summary")
    await page.wait_for_selector("#topic-graph .node")
    found["a topic's link graph"] = await serious_violations(page, axe_source)
    await page.click(f"#notes button[title='{note}']")
    await page.wait_for_selector("#versions-status:text-is('2 versions')")
    await page.click("#compare")
    await page.wait_for_selector("#diff li")
    found["a note open, versions compared"] = await serious_violations(page, axe_source)
    await page.fill("#search", "finding")
    await page.press("#search", "Enter")
    await page.wait_for_selector("#search-hits li")
    found["search results"] = await serious_violations(page, axe_source)
    await page.set_viewport_size({"width": 390, "height": 844})
    found["phone width"] = await serious_violations(page, axe_source)
    assert found == {state: [] for state in found}


async def test_a_note_open_with_its_warnings_shown_has_no_serious_violation_at_either_width(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, page: Any, axe_source: str
) -> None:
    token = admin_token(issuer, workspace)
    claim, rebuttal = f"bb://{workspace}/facts/claim", f"bb://{workspace}/facts/rebuttal"
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(client, "update_state", uri=claim, digest="The claim.", body="yes")
        await call(client, "update_state", uri=rebuttal, digest="The rebuttal.", body="no")
        await call(client, "link_state", src=rebuttal, rel="contradicts", dst=[claim])
    await page.goto(gateway.url + "/board")
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await page.click("text=facts (2)")
    await page.click(f"#notes button[title='{claim}']")
    await page.wait_for_selector("#note-warnings li")
    assert "contradict" in await page.inner_text("#note-warnings")
    found: dict[str, list[str]] = {}
    found["warnings shown, 1280x800"] = await serious_violations(page, axe_source)
    await page.set_viewport_size({"width": 390, "height": 844})
    found["warnings shown, 390x844"] = await serious_violations(page, axe_source)
    assert found == {state: [] for state in found}
