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
    name: str
    description: str
    input_model: type[BaseModel]
    fn: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        """The Messages API tool definition, its input schema taken from the Pydantic model."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_model.model_json_schema(),
        }


class Toolbox:
    """The tools one agent may call, by name, called in this process (``agents.mcp_client`` has the MCP one)."""

    transport = ToolTransport.IN_PROCESS

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def call(self, name: str, raw_input: Any) -> Outcome:
        tool = self.tools.get(name)
        if tool is None:
            message = f"unknown tool {name!r}; available tools: {', '.join(self.tools)}"
            return failed(ErrorCategory.VALIDATION, message, ToolFailure(ErrorCategory.VALIDATION, message))
        return run_tool(tool.input_model, tool.fn, raw_input)
