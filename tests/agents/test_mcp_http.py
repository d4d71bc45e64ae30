"""The MCP server as other clients meet it: streamable HTTP with the official SDK's client, failures
as ``structuredContent``, a server that cannot serve saying why, and the judge's arguments validated."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from agents.mcp_client import McpServerError, mcp_toolbox
from agents.mcp_server import JUDGE_TOOL
from agents.scenarios import registry_load, registry_use
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def http_server(scenario: str) -> Iterator[str]:
    """``python -m agents.mcp_server --scenario NAME --http PORT`` as a subprocess; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.mcp_server", "--scenario", scenario, "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start: {proc.stderr.read()}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def session_calls(url: str, calls: list[tuple[str, dict]]) -> tuple[object, list, list]:
    """Initialize, list the tools and make ``calls`` with the SDK's streamable HTTP client."""
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        init = await session.initialize()
        try:
            tools = [t.name for t in (await session.list_tools()).tools]
        except MCPError as exc:
            tools = [f"MCPError: {exc}"]
        results = [await session.call_tool(name, args) for name, args in calls]
        return init, tools, results


def test_a_failing_call_over_streamable_http_carries_the_structured_error_as_structured_content():
    with http_server("refund-too-old") as url:
        _init, tools, (refused, bad_judge, unknown) = anyio.run(
            session_calls,
            url,
            [("process_refund", {"order_id": "0871"}), (JUDGE_TOOL, {"steps": "all of them"}), ("nope", {})],
        )
    assert tools == ["lookup_orders", "process_refund"]
    error = {
        "isError": True,
        "error": {
            "errorCategory": "business",
            "isRetryable": False,
            "message": "Refunds close after 30 days. This order is 239 days old.",
        },
    }
    assert refused.is_error is True and refused.structured_content == error
    assert refused.content[0].text == (
        '{"isError": true, "error": {"errorCategory": "business", "isRetryable": false, "message": '
        '"Refunds close after 30 days. This order is 239 days old."}}'
    )
    # The judge validates what it is sent: a wrong run is a validation error naming each field, not a crash.
    assert bad_judge.is_error is True
    assert bad_judge.structured_content["error"] == {
        "errorCategory": "validation",
        "isRetryable": False,
        "message": f"{JUDGE_TOOL}: Invalid input -> steps: Input should be a valid list; end: Field required",
    }
    assert unknown.is_error is True and unknown.structured_content["error"]["message"] == (
        "unknown tool 'nope'; available tools: lookup_orders, process_refund"
    )


def test_a_server_for_an_unknown_scenario_tells_the_client_why():
    with http_server("no-such-scenario") as url:
        init, tools, (called,) = anyio.run(session_calls, url, [("process_refund", {"order_id": "0871"})])
    reason = "unknown scenario 'no-such-scenario'; expected one of: currency-unsupported, "
    assert init.instructions.startswith(f"This server cannot serve: {reason}")
    assert tools[0].startswith(f"MCPError: this server cannot serve: {reason}")
    assert called.is_error is True and called.structured_content["error"]["errorCategory"] == "fatal"
    assert called.structured_content["error"]["message"].startswith(f"this server cannot serve: {reason}")


def test_the_harness_says_what_a_stdio_server_that_cannot_serve_told_it(monkeypatch):
    # This process knows the example pack; the server it starts is not told of it.
    monkeypatch.delenv("RLT_SCENARIO_PACKS", raising=False)
    with registry_use(registry_load("examples.inventory_pack")) as loaded:
        scenario = loaded.scenarios["inventory-short-stock"]
        with pytest.raises(McpServerError) as caught, mcp_toolbox(scenario):
            pass
    assert str(caught.value).startswith(
        "the MCP server for 'inventory-short-stock' failed: this server cannot serve: unknown scenario "
        "'inventory-short-stock'; expected one of: currency-unsupported"
    )
