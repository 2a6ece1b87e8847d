"""The README's "Connect a client" section, entry by entry, against a real gateway.

Each test reads its command or file from the README itself and swaps the placeholder endpoint
and token for this gateway's URL and a fresh token, so the text a user copies is the text that
runs. The clients are the versions locked in ``npm_clients/package-lock.json`` (Claude Code,
mcp-remote, the MCP Inspector, the TypeScript SDK, and a Node 22 for the Inspector), installed
there with ``npm ci`` once and reused while the lockfile's versions match.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from npm_support import (
    install_failed,
    installed_from_lockfile,
    locked_node,
    locked_versions,
    platform_suffix,
)
from support import GatewayProcess, agent_token, call, child_process, mcp_client

from blackboard_mcp import __version__
from blackboard_mcp.auth import TokenIssuer

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLIENTS_DIR = Path(__file__).parent / "npm_clients"
PLACEHOLDER_URL = "https://bb.example.org/mcp/"
FIVE_TOOLS = sorted(["update_state", "get_state", "list_keys", "search_keys", "link_state"])
# npm ci takes about 30 s with a warm cache (Claude Code's native binary is most of it).
NPM_CI_TIMEOUT_SECONDS = 600
CLIENT_TIMEOUT_SECONDS = 60
# The Inspector 2.12 needs this Node or later (its package.json "engines").
INSPECTOR_MIN_NODE = (22, 19, 0)


# ---------------------------------------------------------------- the README


def readme_entry(heading: str) -> str:
    """The text of ``### heading`` under "## Connect a client"."""
    text = README.read_text()
    section = text.split("\n## Connect a client\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### (.+)$", section, flags=re.MULTILINE)
    entries = dict(zip(parts[1::2], parts[2::2], strict=True))
    return entries[heading]


def fenced(entry: str, lang: str) -> str:
    [block] = re.findall(rf"^```{lang}\n(.*?)^```$", entry, re.MULTILINE | re.DOTALL)
    return str(block)


def command_lines(entry: str, program: str) -> list[str]:
    """The indented shell lines of ``entry`` that run ``program``."""
    return [line.strip() for line in entry.splitlines() if line.startswith(f"    {program} ")]


def shell_words(line: str, url: str, token: str) -> list[str]:
    """``line`` split as a POSIX shell would, with $BB_TOKEN set to ``token``."""
    assert PLACEHOLDER_URL in line and "$BB_TOKEN" in line, line
    words = shlex.split(line.replace(PLACEHOLDER_URL, url))
    return [word.replace("$BB_TOKEN", token) for word in words]


# ---------------------------------------------------------------- the installed clients


@dataclass(frozen=True)
class Clients:
    """Paths of the locked clients inside npm_clients/node_modules."""

    node: str  # Node 22, from the node-<platform> package: the Inspector needs it
    claude: Path
    modules: Path

    def package(self, name: str) -> dict[str, Any]:
        manifest = json.loads((self.modules / name / "package.json").read_text())
        assert isinstance(manifest, dict)
        return manifest

    def bin(self, name: str, command: str) -> Path:
        return self.modules / name / str(self.package(name)["bin"][command])


@pytest.fixture(scope="session")
def clients() -> Clients:
    modules = installed_from_lockfile(
        CLIENTS_DIR, "the MCP clients of the README", NPM_CI_TIMEOUT_SECONDS
    )
    node = locked_node(CLIENTS_DIR)
    # The native build Claude Code's own installer would copy over its bin/ placeholder; run
    # it directly so the test does not depend on npm running install scripts.
    claude = modules / "@anthropic-ai" / f"claude-code-{platform_suffix()}" / "claude"
    if not claude.is_file():
        install_failed(CLIENTS_DIR, f"no {claude.relative_to(CLIENTS_DIR)} for this platform")
    return Clients(node=node, claude=claude, modules=modules)


# ---------------------------------------------------------------- helpers


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_SECONDS,
        check=False,
        **kwargs,
    )


def report(completed: subprocess.CompletedProcess[str], gateway: GatewayProcess) -> str:
    return (
        f"argv: {completed.args}\nexit {completed.returncode}\nstdout: {completed.stdout}\n"
        f"stderr: {completed.stderr[-3000:]}\ngateway log tail: {gateway.log_text()[-2000:]}"
    )


def notes_token(issuer: TokenIssuer, workspace: str) -> str:
    """An agent that may read every topic and write `notes` only."""
    return agent_token(issuer, workspace, read=["*"], write=["notes"])


class StdioPeer:
    """An MCP client speaking newline-delimited JSON-RPC to a process's stdin and stdout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.next_id = 0
        self.reader = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self.reader.start()

    def close(self) -> str:
        """Close stdin, which is how a host ends a stdio server; returns its stderr."""
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)
        self.process.stdout.close()
        stderr = self.process.stderr.read()
        self.process.stderr.close()
        return stderr

    def _pump(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params or {}})
        while True:
            line = self.lines.get(timeout=CLIENT_TIMEOUT_SECONDS)
            assert line is not None, f"the process closed stdout before answering {method}"
            message = json.loads(line)
            # Notifications and server-to-client requests are not answers.
            if message.get("id") == self.next_id and "method" not in message:
                assert isinstance(message, dict)
                return message


# ---------------------------------------------------------------- Claude Code


def test_claude_code_add_then_get_reports_the_gateway_connected(
    clients: Clients,
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    entry = readme_entry("Claude Code")
    assert f"Claude Code {locked_versions(CLIENTS_DIR)['@anthropic-ai/claude-code']}" in entry
    [add] = command_lines(entry, "claude mcp add")
    [get] = command_lines(entry, "claude mcp get")
    # Claude Code keeps its config under HOME; a fresh one per test, and nothing phones home.
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    token = notes_token(issuer, workspace)

    def claude(words: list[str]) -> subprocess.CompletedProcess[str]:
        assert words[0] == "claude"
        return run([str(clients.claude), *words[1:]], env=env, cwd=tmp_path)

    added = claude(shell_words(add, gateway.mcp_url, token))
    assert added.returncode == 0, report(added, gateway)
    assert "Added HTTP MCP server blackboard" in added.stdout
    # The token is stored but not echoed.
    assert token not in added.stdout

    got = claude(shlex.split(get))
    assert got.returncode == 0, report(got, gateway)
    assert "Status: ✔ Connected" in got.stdout, report(got, gateway)
    assert "Type: http" in got.stdout

    # The same command with a token the gateway refuses: the status says so, so "Connected"
    # above is the gateway accepting this token, not just a port that answers.
    refused = shell_words(add, gateway.mcp_url, "not-a-token")
    refused[refused.index("blackboard")] = "blackboard-refused"
    assert claude(refused).returncode == 0
    listed = claude(["claude", "mcp", "list"])
    assert listed.returncode == 0, report(listed, gateway)
    lines = {line.split(":", 1)[0]: line for line in listed.stdout.splitlines() if ": " in line}
    assert "✔ Connected" in lines["blackboard"], listed.stdout
    assert "✔ Connected" not in lines["blackboard-refused"], listed.stdout
    assert "Failed to connect" in lines["blackboard-refused"], listed.stdout


# ---------------------------------------------------------------- Claude Desktop


def test_claude_desktop_config_runs_mcp_remote_over_stdio_with_the_header_only(
    clients: Clients,
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    config = json.loads(fenced(readme_entry("Claude Desktop (through mcp-remote)"), "json"))
    server = config["mcpServers"]["blackboard"]
    assert server["command"] == "npx"
    npx_flag, package, *args = server["args"]
    # npx -y <package>@<version>: the version the test installed, so the test runs it.
    assert npx_flag == "-y"
    assert package == f"mcp-remote@{locked_versions(CLIENTS_DIR)['mcp-remote']}"
    assert PLACEHOLDER_URL in args
    args = [gateway.mcp_url if a == PLACEHOLDER_URL else a for a in args]
    assert server["env"]["AUTH"] == "Bearer <token>"
    token = notes_token(issuer, workspace)
    # What Claude Desktop does: start the command with the config's env over its own; the
    # process's config dir (~/.mcp-auth) goes to a fresh HOME.
    env = {**os.environ, "HOME": str(tmp_path), **server["env"]}
    env["AUTH"] = env["AUTH"].replace("<token>", token)
    process = child_process(
        [clients.node, str(clients.bin("mcp-remote", "mcp-remote")), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    peer = StdioPeer(process)
    try:
        initialized = peer.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "claude-desktop-stand-in", "version": "0"},
            },
        )
        peer.send({"method": "notifications/initialized"})
        listed = peer.request("tools/list")
        uri = f"bb://{workspace}/notes/desktop"
        created = peer.request(
            "tools/call",
            {
                "name": "update_state",
                "arguments": {
                    "uri": uri,
                    "digest": "Written from the desktop",
                    "body": "",
                    "expect_version": 0,
                },
            },
        )
        read = peer.request("tools/call", {"name": "get_state", "arguments": {"uris": [uri]}})
        outside = peer.request(
            "tools/call",
            {
                "name": "update_state",
                "arguments": {
                    "uri": f"bb://{workspace}/plans/desktop",
                    "digest": "not mine to write",
                    "body": "",
                    "expect_version": 0,
                },
            },
        )
    finally:
        stderr = peer.close()
    context = f"mcp-remote stderr: {stderr[-3000:]}\ngateway log: {gateway.log_text()[-2000:]}"

    server_info = initialized["result"]["serverInfo"]
    assert server_info == {"name": "blackboard-mcp", "version": __version__}, context
    assert sorted(t["name"] for t in listed["result"]["tools"]) == FIVE_TOOLS
    assert created["result"]["isError"] is False, context
    assert created["result"]["structuredContent"]["version"] == 1
    [item] = read["result"]["structuredContent"]["items"]
    assert (item["uri"], item["digest"]) == (uri, "Written from the desktop")
    # The token's grants travel with the header: `plans` is outside its write scope.
    assert outside["result"]["isError"] is True
    assert outside["result"]["structuredContent"]["error"]["code"] == "forbidden"
    # The header was enough: mcp-remote never began its OAuth flow.
    assert "Using custom headers: Authorization" in stderr, context
    assert "Please authorize this client" not in stderr, context
    assert token not in stderr


def test_mcp_remote_with_a_wrong_token_says_the_token_was_refused_and_where_to_get_one(
    clients: Clients, gateway: GatewayProcess, tmp_path: Path
) -> None:
    # mcp-remote answers a 401 with OAuth discovery; this board is not an authorization
    # server, and its plain-text 404s made mcp-remote fail on a JSON parse error instead.
    process = child_process(
        [
            clients.node, str(clients.bin("mcp-remote", "mcp-remote")), gateway.mcp_url,
            "--header", "Authorization: Bearer not-a-token",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
        cwd=tmp_path,
    )  # fmt: skip
    peer = StdioPeer(process)
    try:
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "wrong-token", "version": "0"},
                },
            }
        )
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stderr = peer.close()
    assert "InvalidTokenError" in stderr and "bearer token sent was refused" in stderr, stderr
    assert "board's admin" in stderr
    assert "is not valid JSON" not in stderr


# ---------------------------------------------------------------- VS Code and Cursor


def _resolve(value: str, variables: dict[str, str]) -> str:
    """The editor's ${...} substitution; an unknown variable fails rather than stays."""

    def one(match: re.Match[str]) -> str:
        assert match.group(1) in variables, f"unresolved {match.group(0)}"
        return variables[match.group(1)]

    return re.sub(r"\$\{([^}]+)\}", one, value)


async def _through_python_client(url: str, headers: dict[str, str], workspace: str) -> None:
    [authorization] = headers.items()
    assert authorization[0] == "Authorization"
    scheme, _, token = authorization[1].partition(" ")
    assert scheme == "Bearer"
    async with mcp_client(url, token) as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == FIVE_TOOLS
        uri = f"bb://{workspace}/notes/editor"
        is_error, body = await call(
            client, "update_state", uri=uri, digest="from the editor", body="", expect_version=0
        )
        assert not is_error and body["version"] == 1, body


async def test_vs_code_mcp_json_reaches_the_gateway_with_its_url_and_prompted_token(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    config = json.loads(fenced(readme_entry("VS Code"), "json"))
    [prompt] = config["inputs"]
    assert prompt["type"] == "promptString" and prompt["password"] is True
    server = config["servers"]["blackboard"]
    assert server["type"] == "http"
    assert server["url"] == PLACEHOLDER_URL
    token = notes_token(issuer, workspace)
    headers = {
        name: _resolve(value, {f"input:{prompt['id']}": token})
        for name, value in server["headers"].items()
    }
    assert headers == {"Authorization": f"Bearer {token}"}
    await _through_python_client(gateway.mcp_url, headers, workspace)


async def test_cursor_mcp_json_reaches_the_gateway_with_its_url_and_env_token(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    config = json.loads(fenced(readme_entry("Cursor"), "json"))
    server = config["mcpServers"]["blackboard"]
    # A remote server in Cursor is a url (no command); Cursor picks Streamable HTTP itself.
    assert set(server) == {"url", "headers"}
    assert server["url"] == PLACEHOLDER_URL
    token = notes_token(issuer, workspace)
    headers = {
        name: _resolve(value, {"env:BB_TOKEN": token}) for name, value in server["headers"].items()
    }
    assert headers == {"Authorization": f"Bearer {token}"}
    await _through_python_client(gateway.mcp_url, headers, workspace)


# ---------------------------------------------------------------- MCP Inspector


def _node_version(node: str) -> tuple[int, ...]:
    out = run([node, "--version"]).stdout.strip().lstrip("v")
    return tuple(int(part) for part in out.split("."))


def test_inspector_cli_lists_the_tools_and_calls_one_with_the_header(
    clients: Clients, gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    assert _node_version(clients.node) >= INSPECTOR_MIN_NODE
    engines = clients.package("@modelcontextprotocol/inspector")["engines"]["node"]
    assert engines == ">=22.19.0", "the README states the Inspector's Node requirement"
    list_line, call_line = command_lines(readme_entry("MCP Inspector (CLI)"), "npx")
    token = notes_token(issuer, workspace)
    launcher = str(clients.bin("@modelcontextprotocol/inspector", "inspector"))
    version = locked_versions(CLIENTS_DIR)["@modelcontextprotocol/inspector"]
    outputs = []
    for line in (list_line, call_line):
        npx, package, *args = shell_words(line, gateway.mcp_url, token)
        assert (npx, package) == ("npx", f"@modelcontextprotocol/inspector@{version}")
        completed = run([clients.node, launcher, *args], env={**os.environ, "HOME": str(tmp_path)})
        assert completed.returncode == 0, report(completed, gateway)
        outputs.append(json.loads(completed.stdout))
    listed, called = outputs
    assert sorted(t["name"] for t in listed["tools"]) == FIVE_TOOLS
    assert called["isError"] is False
    assert called["structuredContent"]["items"] == []


def test_inspector_cli_without_the_header_gets_no_tools(
    clients: Clients, gateway: GatewayProcess, tmp_path: Path
) -> None:
    [list_line, _] = command_lines(readme_entry("MCP Inspector (CLI)"), "npx")
    words = shell_words(list_line, gateway.mcp_url, "unused")
    at = words.index("--header")
    del words[at : at + 2]
    launcher = str(clients.bin("@modelcontextprotocol/inspector", "inspector"))
    completed = run([clients.node, launcher, *words[2:]], env={**os.environ, "HOME": str(tmp_path)})
    assert '"tools"' not in completed.stdout
    assert "update_state" not in completed.stdout


# ---------------------------------------------------------------- the SDK snippets


def test_the_python_snippet_lists_the_tools_writes_a_note_and_reads_it_back(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    code = fenced(readme_entry("Python (the `mcp` SDK)"), "python")
    assert code.count(PLACEHOLDER_URL) == 1
    completed = run(
        [sys.executable, "-c", code.replace(PLACEHOLDER_URL, gateway.mcp_url)],
        env={**os.environ, "BB_TOKEN": notes_token(issuer, workspace), "BB_WORKSPACE": workspace},
    )
    assert completed.returncode == 0, report(completed, gateway)
    tools_line, result_line = completed.stdout.splitlines()
    assert json.loads(tools_line) == FIVE_TOOLS
    result = json.loads(result_line)
    assert result == {"written": True, "version": 1, "body": "Hello from the Python SDK."}


@pytest.fixture
def ts_snippet_dir(clients: Clients, tmp_path: Path) -> Iterator[Path]:
    # Node resolves the SDK from a node_modules next to the script.
    (tmp_path / "node_modules").symlink_to(clients.modules, target_is_directory=True)
    yield tmp_path


def test_the_typescript_snippet_lists_the_tools_and_reads_a_topic(
    clients: Clients,
    ts_snippet_dir: Path,
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    workspace: str,
) -> None:
    entry = readme_entry("TypeScript (`@modelcontextprotocol/sdk`)")
    assert f"SDK {locked_versions(CLIENTS_DIR)['@modelcontextprotocol/sdk']}" in entry
    code = fenced(entry, "js")
    assert code.count(PLACEHOLDER_URL) == 1
    script = ts_snippet_dir / f"snippet-{uuid.uuid4().hex[:8]}.mjs"
    script.write_text(code.replace(PLACEHOLDER_URL, gateway.mcp_url))
    completed = run(
        [clients.node, str(script)],
        env={**os.environ, "BB_TOKEN": notes_token(issuer, workspace)},
        cwd=ts_snippet_dir,
    )
    assert completed.returncode == 0, report(completed, gateway)
    tools_line, result_line = completed.stdout.splitlines()
    assert json.loads(tools_line) == FIVE_TOOLS
    result = json.loads(result_line)
    assert result["isError"] is False
    assert result["result"]["items"] == []
