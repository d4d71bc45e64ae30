"""A scenario's tools served by an MCP server built with the official ``mcp`` SDK.

``python -m agents.mcp_server --scenario NAME`` serves one scenario's tools over stdio: the harness
starts it as a subprocess when a policy's ``tool_transport`` is ``mcp`` (``agents.mcp_client``).
With ``--http PORT`` it serves them over streamable HTTP instead, at ``http://HOST:PORT/mcp``, for
any MCP client (docs/mcp.md); one process is one world, which every session to it shares. Any
registered scenario can be served, the lessons' and every pack's in ``RLT_SCENARIO_PACKS``, except one
whose world starts sub-agents in the harness (``coordinator-partial``).

- The **world** lives here: one server is one session is one run, and the server creates the
  scenario's world when it is built, so the tools change the server's copy and nobody else's.
- ``tools/list`` lists each tool with its input schema taken from its Pydantic model (and the
  ``readOnlyHint`` / ``idempotentHint`` annotations it declares), exactly the
  schema the in-process harness sends the model.
- ``tools/call`` runs the tool through ``run_tool`` (validate, then run, never raise). A failure is a
  ``CallToolResult`` with ``isError: true`` carrying lesson 002's structured error
  (``{"isError": true, "error": {"errorCategory", "isRetryable", "message"}}``) as
  ``structuredContent`` and as JSON text; a success is the result as JSON text (and as
  ``structuredContent`` when it is an object). The server does not apply
  the harness's policy: how much of the error the model sees (bare, message, structured) and whether
  a call is retried stay the harness's, as they are in process.
- The **verdict** is judged here too, on the world the tools changed: after the run the harness calls
  ``rlt/judge`` (a tool that is not listed, so the model never sees it, and whose name no pack tool
  can take) with the run as it recorded it, and gets the judge's verdict back. Its arguments are
  validated: anything but ``{"start": {…}, "steps": [{…}, …], "end": {…}}`` with readable steps is an
  ``isError`` result naming what is wrong, never a crash.
- A server that cannot serve (an unknown scenario, a pack that cannot be loaded, a scenario that
  cannot be served over MCP) still answers: ``initialize`` carries the reason in ``instructions``,
  ``tools/list`` is a JSON-RPC error saying it, ``tools/call`` an ``isError`` result saying it; over
  stdio the process exits 2 once the client goes, after saying it on stderr too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcp import MCPError, types
from mcp.server import Server
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import error_json
from .events import RunEnd, RunStart, StepEvent, Verdict
from .packs import Scenario
from .runner import Outcome, validation_message

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


def error_result(error: dict[str, Any]) -> types.CallToolResult:
    """A failed ``tools/call``: the structured error as ``structuredContent`` and as its JSON text."""
    return types.CallToolResult(content=[types.TextContent(text=_text(error))], structured_content=error, is_error=True)


def call_tool_result(outcome: Outcome) -> types.CallToolResult:
    """The ``CallToolResult`` for one outcome: ``isError`` with the structured error, or the content."""
    if not outcome.ok:
        return error_result(
            error_json(outcome.category or "business", outcome.message or "", retryable=outcome.retryable)
        )
    structured = outcome.content if isinstance(outcome.content, dict) else None
    return types.CallToolResult(content=[types.TextContent(text=_text(outcome.content))], structured_content=structured)


class JudgeArguments(BaseModel):
    """What ``rlt/judge`` takes: the run as ``run_to_dict`` sends it."""

    model_config = ConfigDict(extra="forbid")

    start: dict[str, Any] | None = None
    steps: list[dict[str, Any]]
    end: dict[str, Any]


def judge_result(prepared: Any, arguments: Any) -> types.CallToolResult:
    """The judge's verdict on the run in ``arguments``, or a validation error naming what is wrong."""
    try:
        run = JudgedRun(JudgeArguments.model_validate(arguments or {}).model_dump())
    except ValidationError as exc:
        return error_result(error_json("validation", f"{JUDGE_TOOL}: {validation_message(exc)}"))
    except (KeyError, TypeError, ValueError) as exc:  # a step or an end the recorder's types cannot read
        message = f"{JUDGE_TOOL}: the run cannot be read ({type(exc).__name__}: {exc}); send it as run_to_dict makes it"
        return error_result(error_json("validation", message))
    verdict: Verdict = prepared.judge(run)
    body = {"passed": verdict.passed, "reason": verdict.reason, "checks": verdict.checks}
    return types.CallToolResult(content=[types.TextContent(text=_text(body))], structured_content=body)


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
                types.Tool(
                    name=s["name"],
                    description=s["description"],
                    input_schema=s["input_schema"],
                    annotations=types.ToolAnnotations(**s["annotations"]) if s.get("annotations") else None,
                )
                for s in toolbox.definitions()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == JUDGE_TOOL:
            return judge_result(prepared, params.arguments)
        return call_tool_result(toolbox.call(params.name, params.arguments or {}))

    return Server(SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


def unavailable_server(reason: str) -> Server[Any]:
    """A server that serves no tools and tells the client why, on every request it can answer."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        raise MCPError(types.INVALID_PARAMS, f"this server cannot serve: {reason}")

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return error_result(error_json("fatal", f"this server cannot serve: {reason}"))

    return Server(
        SERVER_NAME,
        version="1",
        instructions=f"This server cannot serve: {reason}",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(server: Server[Any], *, host: str = "127.0.0.1") -> Any:
    """The server as a streamable HTTP (ASGI) application, answering at ``/mcp``."""
    return server.streamable_http_app(host=host)


def serve_http(server: Server[Any], *, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(http_app(server, host=host), host=host, port=port, log_level="warning")


def scenario_server(name: str) -> tuple[Server[Any], str | None]:
    """The server for scenario ``name``, or one that says why it cannot serve and that reason."""
    from .scenarios import registry

    try:
        known = registry().scenarios
        if name not in known:
            raise ValueError(f"unknown scenario {name!r}; expected one of: {', '.join(known)}")
        return build_server(known[name]), None
    except ValueError as exc:  # PackError too
        return unavailable_server(str(exc)), str(exc)


def main(argv: list[str] | None = None) -> int:
    import anyio

    top = argparse.ArgumentParser(
        prog="python -m agents.mcp_server",
        description="Serve one scenario's tools as an MCP server, over stdio or streamable HTTP.",
    )
    top.add_argument("--scenario", required=True, help="a scenario name (see: python -m agents list)")
    top.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on this port, at /mcp")
    top.add_argument("--host", default="127.0.0.1", help="the address to serve HTTP on (default 127.0.0.1)")
    args = top.parse_args(argv)
    if args.http is not None and not 0 < args.http < 65536:
        top.error(f"--http: expected a port from 1 to 65535, got {args.http}")
    server, reason = scenario_server(args.scenario)
    if reason:
        print(f"error: {reason}", file=sys.stderr)
    if args.http is not None:
        serve_http(server, host=args.host, port=args.http)
    else:
        anyio.run(serve_stdio, server)
    return 2 if reason else 0


if __name__ == "__main__":
    sys.exit(main())
