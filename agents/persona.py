"""What the simulated model brings to one agent before it reads any tool_result: its persona.

A persona is scenario data, never knowledge of a pack's tools: the opening call(s) the scenario
declares, inputs it would try instead, how often it repeats a call it was told only "Error" about,
and (for the lessons' pack only) a ``Wording`` that phrases answers the way the lessons print them.
Importing this module loads nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class Call(NamedTuple):
    """One tool call the simulated model opens with: a tool name and its input."""

    name: str
    input: dict[str, Any]


def call(name: str, /, **input: Any) -> Call:
    """``call("reserve_stock", sku="LMP-001", quantity=5)``: an opening call, as scenario data."""
    return Call(name, input)


class Wording:
    """How the simulated model phrases what it says; every method may return ``None`` for the generic words.

    The generic rules never need one. The lessons' pack supplies its own so that the model prints
    the lessons' exact sentences (``agents.lesson_wording``).
    """

    def action(self, name: str, input: dict[str, Any]) -> str | None:
        """What the call was for, as a verb phrase ("refund order 0871")."""
        return None

    def success(self, reading: Any) -> str | None:
        """The answer to give from a successful tool_result."""
        return None

    def offer(self, reading: Any, tools: list[str]) -> str:
        """A sentence offering another way after a permission refusal ("" for none)."""
        return ""

    def report(self, readings: list[Any]) -> str | None:
        """A coordinator's report from its sub-agents' tool_results (personas with ``coordinator``)."""
        return None


@dataclass(frozen=True)
class Persona:
    """The simulated model's scenario data for one agent.

    ``bare_error_repeats``: how many times it sends the same call again when a tool_result says only
    "Error" before it gives up (generic: once; the lessons' personas give up at once, as the recorded
    Claude run in lesson 002 did). How often it retries a failure that says a retry can help is not
    persona data: the system prompt says it (``agents.llm.simulated``, rule 5).
    """

    opening: tuple[Call | tuple[str, dict[str, Any]], ...] = ()  # the calls of its first turn
    alternatives: tuple[dict[str, Any], ...] = ()  # inputs it would try instead, in order
    repeats_when_stuck: bool = False  # repeats a call it cannot fix (the stuck model)
    coordinator: bool = False  # composes a report from its sub-agents' results
    bare_error_repeats: int = 1
    wording: Wording | None = None
