"""A flaky upstream lookup (lesson 001): fails with "upstream returned 503" a set number of times."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..errors import ToolFailure
from ..vocabulary import ErrorCategory
from . import Tool


class LookupInput(BaseModel):
    key: str = Field(min_length=1, description="The key to look up")


class FlakyUpstream:
    def __init__(self, failures: int, values: dict[str, int] | None = None) -> None:
        self.failures = failures
        self.values = {"answer": 42} if values is None else values
        self.calls = 0

    def lookup(self, key: str) -> dict:
        self.calls += 1
        if self.calls <= self.failures:
            raise ToolFailure(ErrorCategory.TRANSIENT, "upstream returned 503")
        if key not in self.values:
            raise ToolFailure(ErrorCategory.VALIDATION, f"unknown key '{key}'; known keys: {', '.join(self.values)}")
        return {"key": key, "value": self.values[key]}

    def tools(self) -> list[Tool]:
        return [Tool("lookup", "Look up a value by key from the upstream service.", LookupInput, self.lookup)]
