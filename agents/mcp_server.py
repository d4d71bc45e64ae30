"""A scenario's tools served by an MCP server built with the official ``mcp`` SDK.

``python -m agents.mcp_server --scenario NAME`` serves one scenario's tools over stdio: the harness
starts it as a subprocess when a policy's ``tool_transport`` is ``mcp`` (``agents.mcp_client``). Any
registered scenario can be served, the lessons' and every pack's in ``RLT_SCENARIO_PACKS``, except one
whose world starts sub-agents in the harness (``coordinator-partial``).

- The **world** lives here: one server is one session is one run, and the server creates the
  scenario's world when it is built, so the tools change the server's copy and nobody else's.
- ``tools/list`` lists each tool with its input schema taken from its Pydantic model, exactly the
  schema the in-process harness sends the model.
- ``tools/call`` runs the tool through ``run_tool`` (validate, then run, never raise). A failure is a
  ``CallToolResult`` with ``isError: true`` whose text is lesson 002's structured error
  (``{"isError": true, "error": {"errorCategory", "isRetryable", "message"}}``); a success is the
  result as JSON text (and as ``structuredContent`` when it is an object). The server does not apply
  the harness's policy: how much of the error the model sees (bare, message, structured) and whether
  a call is retried stay the harness's, as they are in process.
- The **verdict** is judged here too, on the world the tools changed: after the run the harness calls
  ``rlt/judge`` (a tool that is not listed, so the model never sees it, and whose name no pack tool
  can take) with the run as it recorded it, and gets the judge's verdict back.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcp import types
from mcp.server import Server

from .errors import error_json
from .events import RunEnd, RunStart, StepEvent, Verdict
from .packs import Scenario
from .runner import Outcome

JUDGE_TOOL = "rlt/judge"  # not a valid pack tool name (agents.packs.TOOL_NAME), so it cannot clash
SERVER_NAME = "repair-loop-tracer"


class JudgedRun:
    """A run as the harness recorded it, rebuilt for the judge: what ``agents.judges`` reads."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.start = RunStart.from_dict(data["start"]) if data.get("start") else None
        self.steps = [StepEvent.from_dict(s) for s in data.get("steps") or []]
        self.end = RunEnd.from_dict(data.get("end") or {"stop_reason": "crashed"})
        self.children: list[Any] = []


def run_to_dict(run: Any) -> dict[str, Any]:
    """What ``rlt/judge`` needs of a ``RunResult``: its start, steps and end (the transcript left out)."""
    end = run.end.to_dict()
    end.pop("transcript", None)
    end.pop("verdict", None)
    return {"start": run.start.to_dict(), "steps": [s.to_dict() for s in run.steps], "end": end}


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def call_tool_result(outcome: Outcome) -> types.CallToolResult:
    """The ``CallToolResult`` for one outcome: ``isError`` with the structured error, or the content."""
    if not outcome.ok:
        error = error_json(outcome.category or "business", outcome.message or "", retryable=outcome.retryable)
        return types.CallToolResult(content=[types.TextContent(text=_text(error))], is_error=True)
    structured = outcome.content if isinstance(outcome.content, dict) else None
    return types.CallToolResult(content=[types.TextContent(text=_text(outcome.content))], structured_content=structured)


def build_server(scenario: Scenario) -> Server[Any]:
    """An MCP server for one run of ``scenario``: a fresh world, its tools, and the judge on that world."""
    if scenario.setup is not None:
        raise ValueError(
            f"scenario {scenario.name!r} starts sub-agents from the harness, so its tools cannot be served "
            "over MCP; run it with tool_transport in_process"
        )
    prepared = scenario.prepare()
    toolbox = prepared.toolbox

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s["name"], description=s["description"], input_schema=s["input_schema"])
                for s in toolbox.schemas()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == JUDGE_TOOL:
            verdict: Verdict = prepared.judge(JudgedRun(dict(params.arguments or {})))
            body = {"passed": verdict.passed, "reason": verdict.reason, "checks": verdict.checks}
            return types.CallToolResult(content=[types.TextContent(text=_text(body))])
        return call_tool_result(toolbox.call(params.name, params.arguments or {}))

    return Server(SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    import anyio

    from .scenarios import registry

    top = argparse.ArgumentParser(
        prog="python -m agents.mcp_server", description="Serve one scenario's tools as an MCP server over stdio."
    )
    top.add_argument("--scenario", required=True, help="a scenario name (see: python -m agents list)")
    args = top.parse_args(argv)
    try:
        known = registry().scenarios
        if args.scenario not in known:
            raise ValueError(f"unknown scenario {args.scenario!r}; expected one of: {', '.join(known)}")
        server = build_server(known[args.scenario])
    except ValueError as exc:  # PackError too
        print(f"error: {exc}", file=sys.stderr)
        return 2
    anyio.run(serve_stdio, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
