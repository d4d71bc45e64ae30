"""The project's vocabulary (DESIGN.md), each term spelled once: everything else is built from these.

``tracer`` derives its model and form choices and its divergence constants from these enums, and a
test fails if they disagree. They are ``StrEnum``s: a member equals its plain string value, so
stored rows, JSON and cassettes written before (or by other programs) keep matching. Importing this
module loads nothing but ``enum``.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a run ended. ``interrupted`` is set by the tracer (a worker died), never by the loop."""

    FINAL_ANSWER = "final_answer"
    CONSECUTIVE_ERRORS = "consecutive_errors"
    MAX_STEPS = "max_steps"
    FATAL_ERROR = "fatal_error"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"


class StepKind(StrEnum):
    """What one step of a run is: a tool_use (with its attempts) or the final answer."""

    TOOL_USE = "tool_use"
    FINAL_ANSWER = "final_answer"


class ErrorCategory(StrEnum):
    """A tool failure's category: lesson 002's four plus lesson 001's fatal kind."""

    VALIDATION = "validation"
    TRANSIENT = "transient"
    PERMISSION = "permission"
    BUSINESS = "business"
    FATAL = "fatal"


class ErrorFormat(StrEnum):
    """How a policy turns a failure into a tool_result."""

    RAISE = "raise"  # no tool_result: the exception ends the run
    BARE = "bare"  # is_error with a bare "Error"
    MESSAGE = "message"  # is_error with the failure's message
    STRUCTURED = "structured"  # is_error with category, isRetryable and message


class RetryRule(StrEnum):
    """Which failed tool calls a policy tries again in code."""

    ALL = "all"
    TRANSIENT = "transient"  # only failures that say a retry can help
    NONE = "none"


class ModelBackendName(StrEnum):
    """The model backends ``agents.llm.registry.make_backend`` builds."""

    SIMULATED = "simulated"  # deterministic rules, not Claude; offline
    CLAUDE = "claude"  # the Anthropic API, with ANTHROPIC_API_KEY
    REPLAY = "replay"  # a recorded cassette of request/response pairs


class ToolTransport(StrEnum):
    """How the harness reaches a scenario's tools (a policy setting)."""

    IN_PROCESS = "in_process"  # the tool functions are called in the harness's own process
    MCP = "mcp"  # an MCP server (official `mcp` SDK) serves them; the harness is its client
