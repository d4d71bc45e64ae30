"""The harness as an MCP client: a scenario's tools called through ``ClientSession.call_tool``.

When a policy's ``tool_transport`` is ``mcp``, ``run_scenario`` opens ``mcp_toolbox(scenario)``: it
starts ``python -m agents.mcp_server --scenario NAME`` as a subprocess, talks to it over stdio with
the official ``mcp`` SDK, and hands the loop an ``McpToolbox`` in place of the in-process one. The
loop does not change: it still retries and backs off in code and still formats the tool_result with
the policy. Only the call crosses the process boundary:

- the tools the model is offered are the server's ``tools/list`` (the same schemas as in process);
- a ``CallToolResult`` is read back into the loop's ``Outcome``: ``isError`` with lesson 002's
  structured error becomes a failure with its category, retryable flag and message, and the policy
  then makes the Messages API ``tool_result`` with ``is_error`` of it. The ``CallToolResult`` as it
  came over the wire is kept on the outcome, so each attempt records both spellings;
- the verdict is the server's: ``judge(run)`` sends the recorded run to the server, which judges it
  on the world its tools changed (``agents.mcp_server``).

The SDK is async and the loop is not: the session lives in an event loop on a thread of its own
(``anyio.from_thread.start_blocking_portal``) and the loop's calls wait on it.
``server="memory"`` serves the same server in this process over the SDK's memory streams (tests).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types

from .errors import ToolFailure, is_empty
from .events import Verdict
from .mcp_server import JUDGE_TOOL, build_server, run_to_dict
from .packs import Scenario
from .runner import Outcome, failed
from .tools import Toolbox
from .vocabulary import ErrorCategory, ToolTransport

ServerKind = Literal["stdio", "memory"]
PROJECT = Path(__file__).resolve().parent.parent  # where ``agents`` (and the example packs) import from
CALL_TIMEOUT_S = 60.0
# Never handed to the tool server: it runs the tools, not the model.
WITHHELD_ENV = ("ANTHROPIC_API_KEY",)


class McpServerError(RuntimeError):
    """The MCP server could not be started, or it broke the protocol; says what it wrote to stderr."""


def wire(result: types.CallToolResult) -> dict[str, Any]:
    """A ``CallToolResult`` as the MCP wire spells it (``isError``, ``structuredContent``)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def outcome_of(result: types.CallToolResult) -> Outcome:
    """The loop's ``Outcome`` for a ``CallToolResult``: ``isError`` becomes a failure, read from the
    structured error in its ``structuredContent`` or its text (lesson 002's shape); a plain-text error
    is a ``business`` failure."""
    text = _text_of(result)
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = text
    if result.is_error:
        if isinstance(result.structured_content, dict):  # the structured error, as this server sends it too
            data = result.structured_content
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and error.get("errorCategory") in set(ErrorCategory):
            category, message = error["errorCategory"], str(error.get("message") or "")
            retryable = bool(error.get("isRetryable"))
        else:
            category, retryable = ErrorCategory.BUSINESS, False
            message = text or "the MCP tool failed without a message"
        outcome = failed(category, message, ToolFailure(category, message, retryable=retryable), retryable=retryable)
    else:
        content = result.structured_content if result.structured_content is not None else data
        outcome = Outcome(ok=True, content=content, empty=is_empty(content))
    outcome.mcp_result = wire(result)
    return outcome


class McpToolbox(Toolbox):
    """The tools as an MCP server lists them; ``call`` goes through ``ClientSession.call_tool``."""

    transport = ToolTransport.MCP

    def __init__(self, portal: BlockingPortal, session: ClientSession, tools: list[types.Tool]) -> None:
        self.portal = portal
        self.session = session
        self.listed = {t.name: t for t in tools}
        self.tools = {}  # nothing runs in this process

    def schemas(self) -> list[dict[str, Any]]:
        return [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in self.listed.values()
        ]

    def definitions(self) -> list[dict[str, Any]]:
        """The listed tools with the annotations the server gave them (``readOnlyHint``, ``idempotentHint``…)."""
        out = []
        for schema, listed in zip(self.schemas(), self.listed.values(), strict=True):
            notes = listed.annotations.model_dump(by_alias=True, exclude_none=True) if listed.annotations else {}
            out.append({**schema, "annotations": notes} if notes else schema)
        return out

    def _call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return self.portal.call(lambda: self.session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT_S))

    def call(self, name: str, raw_input: Any) -> Outcome:
        if name not in self.listed:  # as in process; the server's unlisted judge is out of the model's reach
            message = f"unknown tool {name!r}; available tools: {', '.join(self.listed)}"
            return failed(ErrorCategory.VALIDATION, message, ToolFailure(ErrorCategory.VALIDATION, message))
        if not isinstance(raw_input, dict):  # MCP arguments are an object; say so as validation does
            message = f"Invalid input -> input: Input should be an object, got {type(raw_input).__name__}"
            return failed(ErrorCategory.VALIDATION, message, ToolFailure(ErrorCategory.VALIDATION, message))
        try:
            result = self._call(name, raw_input)
        except TimeoutError as exc:
            message = f"the MCP server did not answer {name} within {CALL_TIMEOUT_S:g} s"
            return failed(ErrorCategory.TRANSIENT, message, exc)
        except Exception as exc:  # the server died or broke the protocol: nothing a retry of the call fixes
            message = f"the MCP server failed on {name}: {type(exc).__name__}: {exc}"
            return failed(ErrorCategory.FATAL, message, exc)
        return outcome_of(result)

    def judge(self, run: Any) -> Verdict:
        """The server's verdict on ``run``, judged on the world its tools changed."""
        # Sent as a plain tools/call request: ``call_tool`` would re-list the tools to validate the
        # result of a tool it was never shown, and warn that it is not listed.
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=JUDGE_TOOL, arguments=run_to_dict(run)))
        result = self.portal.call(
            lambda: self.session.send_request(
                request, types.CallToolResult, request_read_timeout_seconds=CALL_TIMEOUT_S
            )
        )
        if result.is_error:
            raise McpServerError(f"the MCP server could not judge the run: {_text_of(result)}")
        data = json.loads(_text_of(result))
        return Verdict(passed=bool(data["passed"]), reason=str(data["reason"]), checks=list(data.get("checks") or []))


def server_parameters(scenario: str) -> StdioServerParameters:
    """``python -m agents.mcp_server --scenario NAME`` with this interpreter, from the project folder,
    with this process's environment (``RLT_SCENARIO_PACKS`` included) less the model's API key."""
    env = {k: v for k, v in os.environ.items() if k not in WITHHELD_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT), env.get("PYTHONPATH", "")) if p)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "agents.mcp_server", "--scenario", scenario], env=env, cwd=str(PROJECT)
    )


@asynccontextmanager
async def _session(scenario: Scenario, server: ServerKind, errlog: Any) -> AsyncIterator[tuple[ClientSession, list]]:
    if server == "stdio":
        params = server_parameters(scenario.name)
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session, (await session.list_tools()).tools
        return
    from mcp.shared.memory import create_client_server_memory_streams

    built = build_server(scenario)
    async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: built.run(served[0], served[1], built.create_initialization_options()))
        async with ClientSession(client[0], client[1]) as session:
            await session.initialize()
            yield session, (await session.list_tools()).tools
        tasks.cancel_scope.cancel()


def _mcp_error(exc: BaseException) -> MCPError | None:
    """The server's JSON-RPC error in ``exc``, or in the task group's exceptions it gathers."""
    if isinstance(exc, MCPError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _mcp_error(inner)
        if found is not None:
            return found
    return None


@contextmanager
def mcp_toolbox(scenario: Scenario, *, server: ServerKind = "stdio") -> Iterator[McpToolbox]:
    """An ``McpToolbox`` connected to a fresh server for ``scenario`` (one server, one world, one run)."""
    if scenario.setup is not None:
        build_server(scenario)  # raises the ValueError that says why
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as errlog:
        connected = False
        try:
            with (
                start_blocking_portal() as portal,
                portal.wrap_async_context_manager(_session(scenario, server, errlog)) as (session, tools),
            ):
                connected = True
                yield McpToolbox(portal, session, tools)
        except Exception as exc:
            if connected or server != "stdio":  # the run's own exceptions, or the in-memory server's
                raise
            said_why = _mcp_error(exc)
            if said_why is not None:  # the server answered, saying why it cannot serve
                raise McpServerError(f"the MCP server for {scenario.name!r} failed: {said_why}") from exc
            errlog.seek(0)
            said = errlog.read()[-2000:].strip()
            raise McpServerError(
                f"the MCP server for {scenario.name!r} failed: {type(exc).__name__}: {exc}"
                + (f"; it said: {said}" if said else "")
            ) from exc
