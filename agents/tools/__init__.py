"""Tools: a function with a Pydantic input model, and the registry the loop looks them up in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..errors import ToolFailure
from ..runner import Outcome, failed, run_tool
from ..vocabulary import ErrorCategory, ToolTransport


@dataclass(frozen=True)
class Tool:
    """A tool; ``read_only`` and ``idempotent`` say, when declared, whether a call changes something and
    whether repeating it is safe (MCP's ``readOnlyHint`` / ``idempotentHint``); None: not declared."""

    name: str
    description: str
    input_model: type[BaseModel]
    fn: Callable[..., Any]
    read_only: bool | None = None
    idempotent: bool | None = None

    def schema(self) -> dict[str, Any]:
        """The Messages API tool definition, its input schema taken from the Pydantic model."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_model.model_json_schema(),
        }

    def annotations(self) -> dict[str, bool]:
        """What the tool declares of its effects, as MCP's tool annotations spell it ({} when nothing)."""
        if self.read_only is None and self.idempotent is None:
            return {}
        notes = {"readOnlyHint": bool(self.read_only)}
        if not self.read_only:
            notes["idempotentHint"] = bool(self.idempotent)
        return notes

    def definition(self) -> dict[str, Any]:
        """The tool as a run records it: its Messages API definition and, when declared, its annotations
        (which the API does not take, so requests carry ``schema()`` only)."""
        notes = self.annotations()
        return {**self.schema(), "annotations": notes} if notes else self.schema()


class Toolbox:
    """The tools one agent may call, by name, called in this process (``agents.mcp_client`` has the MCP one)."""

    transport = ToolTransport.IN_PROCESS

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def definitions(self) -> list[dict[str, Any]]:
        """The tools as a run records them: with their declared annotations (``Tool.definition``)."""
        return [t.definition() for t in self.tools.values()]

    def call(self, name: str, raw_input: Any) -> Outcome:
        tool = self.tools.get(name)
        if tool is None:
            message = f"unknown tool {name!r}; available tools: {', '.join(self.tools)}"
            return failed(ErrorCategory.VALIDATION, message, ToolFailure(ErrorCategory.VALIDATION, message))
        return run_tool(tool.input_model, tool.fn, raw_input)
