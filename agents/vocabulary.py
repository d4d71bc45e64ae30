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
    MAX_TOKENS = "max_tokens"  # the model's reply was cut off at the request's max_tokens
    REFUSAL = "refusal"  # the model declined to go on (the API's stop_reason "refusal")


class StepKind(StrEnum):
    """What one step of a run is: a tool_use (with its attempts), the final answer, or the model turn
    that ended the run without either (cut off by max_tokens, a refusal, a turn the API kept pausing):
    nothing in it is executed."""

    TOOL_USE = "tool_use"
    FINAL_ANSWER = "final_answer"
    MODEL_STOP = "model_stop"


class ApiStopReason(StrEnum):
    """Why the Messages API ended one model response (its ``stop_reason``), as the API spells it."""

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    STOP_SEQUENCE = "stop_sequence"
    MAX_TOKENS = "max_tokens"  # cut off at the request's max_tokens: a tool_use in it may be incomplete
    MODEL_CONTEXT_WINDOW_EXCEEDED = "model_context_window_exceeded"  # cut off at the context window
    PAUSE_TURN = "pause_turn"  # the API paused a long turn: send its content back to continue it
    REFUSAL = "refusal"


# After these the loop executes nothing in the turn and the run ends (a turn still paused after the
# loop's continuations ends it too); its step is a ``StepKind.MODEL_STOP``.
API_STOPS_ENDING_A_RUN = frozenset(
    {
        ApiStopReason.MAX_TOKENS,
        ApiStopReason.MODEL_CONTEXT_WINDOW_EXCEEDED,
        ApiStopReason.REFUSAL,
        ApiStopReason.PAUSE_TURN,
    }
)


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


# The model names the backends send: the simulated model's own, and the one the ``claude`` backend asks
# for when ``ANTHROPIC_MODEL`` is unset.
SIMULATED_MODEL_NAME = "simulated-rules-1"
CLAUDE_DEFAULT_MODEL = "claude-haiku-4-5"
# Who judges a run: the scenario's rules always; ``claude`` adds the model judge (``agents.model_judge``).
JUDGES = ("rules", "claude")
MODEL_JUDGE_LABEL = "model judge (Claude)"


class ToolTransport(StrEnum):
    """How the harness reaches a scenario's tools (a policy setting)."""

    IN_PROCESS = "in_process"  # the tool functions are called in the harness's own process
    MCP = "mcp"  # an MCP server (official `mcp` SDK) serves them; the harness is its client


def in_words(term: str) -> str:
    """A term as every page words it: ``final_answer`` is "Final answer" (the run's stop banner, a
    step's heading, the filters and the compare table alike)."""
    return term.replace("_", " ").capitalize()
