"""Scenario packs: the engineer's own tools and tasks, as data. The documented interface (docs/packs.md).

A pack is a Python module that defines ``PACK = Pack(...)``; ``RLT_SCENARIO_PACKS`` names such
modules, comma-separated, and the web process, the workers and ``python -m agents`` load them
(``agents.scenarios``). A scenario is data:

- its **tools**: functions with a Pydantic input model, made with ``@tool(InputModel)``; a tool's
  first parameter is the run's world, the rest are the model's fields. It fails by raising
  ``ToolFailure(category, message)``; "nothing found" is an empty result, not a failure;
- its **task** (the user's message) and an optional **system** prompt;
- its **world**: a function that returns the starting state, called once per run, so every run
  starts from the same state and its tools change only their own copy;
- its **judge**: named checks on the world's final state and the facts the answer must carry
  (``agents.judges``), never on wording;
- its **opening**: the call(s) the *simulated* model makes first (``call("tool", field=value)``),
  typically the realistic mistake the scenario is about. This is scenario data, not model knowledge:
  after it, the simulated model follows only its generic rules (``agents.llm.simulated``). Claude
  ignores it.

Importing this module loads Pydantic and the light parts of ``agents`` only: no SDK, no loop.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from .answers import Claim
from .errors import ToolFailure
from .events import Verdict
from .judges import (
    Check,
    Judge,
    all_of,
    answered,
    attempts_at_most,
    either,
    gives,
    gives_duration,
    gives_time,
    if_answered,
    mentions,
    mentions_any,
    never_mentions,
    no_false_outage,
    state,
    states,
    stopped,
    true_to_world,
)
from .persona import Call, Persona, call
from .tools import Tool, Toolbox
from .vocabulary import ErrorCategory

__all__ = [
    "DEFAULT_SYSTEM",
    "Call",
    "Check",
    "Claim",
    "ErrorCategory",
    "Judge",
    "Pack",
    "PackError",
    "Scenario",
    "ToolFailure",
    "ToolSpec",
    "all_of",
    "answered",
    "attempts_at_most",
    "call",
    "either",
    "gives",
    "gives_duration",
    "gives_time",
    "if_answered",
    "mentions",
    "mentions_any",
    "never_mentions",
    "no_false_outage",
    "state",
    "states",
    "stopped",
    "tool",
    "true_to_world",
]

DEFAULT_SYSTEM = "You are a helpful assistant. Use the tools when they help, and answer the user plainly."
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")  # stored with every run (Run.scenario holds 100 characters)
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what the Messages API accepts as a tool name


class PackError(ValueError):
    """A pack, scenario or tool that cannot be used, or a pack module that cannot be loaded; says which and why."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a pack declares it: ``fn(world, **fields)`` with ``input_model`` validating the fields."""

    name: str
    description: str
    input_model: type[BaseModel]
    fn: Callable[..., Any]
    read_only: bool | None = None
    idempotent: bool | None = None

    def bind(self, world: Any) -> Tool:
        """The tool one run calls: the function with this run's world as its first argument."""
        return Tool(
            self.name,
            self.description,
            self.input_model,
            functools.partial(self.fn, world),
            read_only=self.read_only,
            idempotent=self.idempotent,
        )


def tool(
    input_model: type[BaseModel],
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
) -> Callable[[Callable[..., Any]], ToolSpec]:
    """Make a tool of a function whose first parameter is the world and the rest ``input_model``'s fields.

    The name defaults to the function's, the description (which the model reads) to its docstring.
    ``read_only`` / ``idempotent`` declare whether a call changes something and whether repeating it is
    safe (MCP's ``readOnlyHint`` / ``idempotentHint``): the harness never retries a declared unsafe write
    blindly (policy ``write_retries``), and diagnosis reads them.
    """
    if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
        raise PackError(f"@tool takes a Pydantic model class (class MyInput(BaseModel): ...), got {input_model!r}")

    def wrap(fn: Callable[..., Any]) -> ToolSpec:
        tool_name = name or fn.__name__
        if not TOOL_NAME.match(tool_name):
            raise PackError(f"tool {tool_name!r}: a tool name is 1-64 letters, digits, _ or -")
        said = description if description is not None else (inspect.getdoc(fn) or "").split("\n\n")[0]
        said = " ".join(said.split())
        if not said:
            raise PackError(
                f"tool {tool_name!r}: give it a description (a docstring or description=…): the model reads it"
            )
        fields = list(input_model.model_fields)
        try:
            inspect.signature(fn).bind(object(), **dict.fromkeys(fields))
        except TypeError as exc:
            raise PackError(
                f"tool {tool_name!r}: {fn.__name__} must take the world first, then the fields of "
                f"{input_model.__name__} ({', '.join(fields) or 'none'}) by name: {exc}"
            ) from None
        return ToolSpec(tool_name, said, input_model, fn, read_only=read_only, idempotent=idempotent)

    return wrap


@dataclass
class Prepared:
    """One run of a scenario, ready to start: its fresh world, the tools bound to it, the persona."""

    world: Any
    toolbox: Toolbox
    persona: Persona
    system: str
    judge_fn: Callable[[Any, Any], Verdict]

    def judge(self, run: Any) -> Verdict:
        return self.judge_fn(self.world, run)


@dataclass(frozen=True)
class Scenario:
    """A task, its tools, the starting state of its world, a judge, and the simulated model's opening.

    ``persona`` and ``setup`` are for the lessons' own pack: a persona carries the lessons' exact
    wording; ``setup(world, session)`` lets a coordinator start sub-agents. A pack needs neither.
    """

    name: str
    title: str
    task: str
    tools: Sequence[ToolSpec]
    world: Callable[[], Any]
    judge: Callable[[Any, Any], Verdict]
    opening: Sequence[Call | tuple[str, dict[str, Any]]] = ()
    description: str = ""
    system: str = DEFAULT_SYSTEM
    persona: Persona | None = field(default=None, repr=False)
    setup: Callable[[Any, Any], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        where = f"scenario {self.name!r}"
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise PackError(f"{where}: a scenario name is lowercase letters, digits and -, at most 100 characters")
        for attr in ("title", "task"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr).strip():
                raise PackError(f"{where}: {attr} must be a non-empty string")
        tools = tuple(self.tools)
        for t in tools:
            if not isinstance(t, ToolSpec):
                raise PackError(f"{where}: tools must be made with @tool(InputModel), got {t!r}")
        names = [t.name for t in tools]
        if not tools or len(set(names)) != len(names):
            raise PackError(f"{where}: tools must be one or more, each with its own name (got {', '.join(names)})")
        if not callable(self.world):
            raise PackError(f"{where}: world must be a function that returns the starting state, got {self.world!r}")
        if not callable(self.judge):
            raise PackError(f"{where}: judge must be a Judge(...) of checks, got {self.judge!r}")
        opening = tuple(Call(*c) for c in self.opening)
        if not opening:
            raise PackError(
                f"{where}: declare the simulated model's opening call(s), e.g. opening=[call({names[0]!r}, …)]"
            )
        for c in opening:
            if c.name not in names or not isinstance(c.input, dict):
                raise PackError(f"{where}: opening call {c.name!r} must name one of its tools ({', '.join(names)})")
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "opening", opening)

    @property
    def judge_checks(self) -> list[str]:
        """The names of the judge's checks (empty for a judge that is a plain function)."""
        return list(getattr(self.judge, "names", []))

    def prepare(self, session: Any = None) -> Prepared:
        """A fresh world for one run, its tools bound to it, and the persona the simulated model plays."""
        world = self.world()
        if self.setup is not None:
            self.setup(world, session)
        persona = replace(self.persona or Persona(), opening=self.opening)
        toolbox = Toolbox([t.bind(world) for t in self.tools])
        return Prepared(world, toolbox, persona, self.system, self.judge)


@dataclass(frozen=True)
class Pack:
    """A named group of scenarios; a pack module defines one as ``PACK``."""

    name: str
    title: str
    scenarios: Sequence[Scenario]
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise PackError(f"pack {self.name!r}: a pack name is lowercase letters, digits and -")
        scenarios = tuple(self.scenarios)
        if not scenarios or not all(isinstance(s, Scenario) for s in scenarios):
            raise PackError(f"pack {self.name!r}: scenarios must be one or more Scenario(...)")
        seen: set[str] = set()
        for s in scenarios:
            if s.name in seen:
                raise PackError(f"pack {self.name!r}: two scenarios are named {s.name!r}")
            seen.add(s.name)
        object.__setattr__(self, "scenarios", scenarios)
