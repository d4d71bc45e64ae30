"""Harness error-handling policies: how outcomes become tool_results and which calls are retried.

A policy is plain data. The presets are the lessons' harnesses; users build more variants from a
plain dict, validated field by field (``policy_from_dict``).

The harness decides a retry from the tool_result it built, as lesson 002's ``should_retry`` does
(``Policy.should_retry``). What each retry rule reads, under each error format:

- ``all``: the tool_result's ``is_error``, under every format (starter: every failure retried).
- ``transient`` under ``structured``: ``isRetryable`` read from the tool_result at
  ``retry_flag_path``: ``error.isRetryable`` (where ``fail`` puts it) or ``isRetryable`` (the top
  level: lesson 002's nested-flag bug, so a timeout that says it is retryable is never retried).
- ``transient`` under ``message`` and ``bare``: those tool_results carry no flag, so the rule is
  lesson 001's ``retry_transient``: it sits in the tool wrapper, before any tool_result is built, and
  retries what the tool raised as transient. ``retry_flag_path`` is not read.
- ``none``: nothing. With ``ask_model_to_retry`` the system prompt asks the model to retry a failure
  that says it is retryable once (lesson 002's Agent SDK path, where Claude decides retries).

A policy with ``code`` (a module ``RLT_POLICY_PACKS`` names, ``agents.policy_code``) builds every
failure's tool_result with the module's ``fail`` and retries what its ``should_retry`` says, in place
of ``error_format``, ``retry_on``, ``retry_flag_path``, ``empty_is_error`` and ``swallow_errors``;
``code_sha256`` is the module's source as it ran.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from . import names
from .policy_code import PolicyCode, PolicyCodeError, load_policy_code, module_paths
from .vocabulary import ErrorCategory, ErrorFormat, RetryRule, ToolTransport

# Where the ``transient`` rule reads ``isRetryable`` in a structured tool_result: inside its error (right),
# or at the top level, where it never is (lesson 002's nested-flag bug). ``Policy.retry_flag_path``.
RETRY_FLAG_PATHS = ("error.isRetryable", "isRetryable")
# The line ``ask_model_to_retry`` adds to the system prompt (lesson 002: "the prompt asks for one retry").
MODEL_RETRY_PROMPT = (
    "If a tool result says isRetryable is true, call the same tool again once with the same input; "
    "never retry a failure that is not retryable."
)


def read_flag(result: Any, path: str) -> Any:
    """The value at a dotted ``path`` in a tool_result's content (``None`` where there is none)."""
    for key in path.split("."):
        if not isinstance(result, dict):
            return None
        result = result.get(key)
    return result


class PolicyError(ValueError):
    """A policy dict that does not validate; ``errors`` maps each field to what is expected."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


class Policy(BaseModel):
    # Enum fields (defaults too) hold their plain values, so ``settings()`` is the JSON it always was.
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=True, validate_default=True)

    name: str = Field(min_length=1, max_length=names.POLICY_NAME_MAX, pattern=names.NAME_PATTERN)
    description: str = ""
    error_format: ErrorFormat = ErrorFormat.STRUCTURED
    retry_on: RetryRule = RetryRule.TRANSIENT
    max_attempts: int = Field(default=3, ge=1, le=10)
    backoff_base_s: float = Field(default=0.2, ge=0, le=30)
    backoff_max_s: float = Field(default=2.0, ge=0, le=120)
    backoff_jitter: float = Field(default=0.5, ge=0, le=1)  # fraction of the delay, drawn at random
    empty_is_error: bool = False
    consecutive_error_limit: int | None = Field(default=3, ge=1, le=50)  # None: no guard
    stop_on_fatal: bool = True
    max_steps: int = Field(default=10, ge=1, le=200)
    # Where the transient rule reads isRetryable in a structured tool_result; "isRetryable" (the top
    # level) is lesson 002's nested-flag bug.
    retry_flag_path: Literal["error.isRetryable", "isRetryable"] = "error.isRetryable"
    swallow_errors: bool = False  # a failure becomes an empty result, no is_error: lesson 001's common mistake
    # A failure's text loses its stack traces, SQL, hostnames, file paths and secrets before the model
    # reads it (lesson 001: "Keep internal details out"); each attempt names what was removed.
    clean_error_text: bool = True
    # A failed call of a tool that declares it changes something and is not safe to repeat (read_only and
    # idempotent false, MCP's readOnlyHint / idempotentHint): "blind" retries it like any call (a timeout
    # after the charge went through charges twice); "never" never retries it; "idempotency_key" retries it
    # only when the tool takes an idempotency key, which the harness fills in, the same on every attempt.
    write_retries: Literal["blind", "never", "idempotency_key"] = "idempotency_key"
    ask_model_to_retry: bool = False  # the system prompt asks the model to retry a retryable failure once
    tool_transport: ToolTransport = ToolTransport.IN_PROCESS  # mcp: the tools are served by an MCP server
    # A policy module's path: its fail() and should_retry() replace the error format and retry rule.
    code: str | None = Field(default=None, max_length=200, pattern=r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
    code_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # of the module's source
    _code: PolicyCode | None = PrivateAttr(default=None)

    @field_validator("consecutive_error_limit", mode="before")
    @classmethod
    def _zero_means_off(cls, value: Any) -> Any:
        return None if value in (0, "0", "", None) else value

    def settings(self) -> dict[str, Any]:
        """The snapshot stored with each run; ``code`` and ``code_sha256`` only for a policy with code."""
        return self.model_dump(exclude=None if self.code else {"code", "code_sha256"})

    @property
    def policy_code(self) -> PolicyCode | None:
        """The loaded module of a policy with ``code``; None for a settings-only policy."""
        if self.code is None:
            return None
        if self._code is None:
            self._code = load_policy_code(self.code)
        return self._code

    def should_retry(self, *, result: Any, is_error: bool, category: str | None, attempt: int) -> bool:
        """Whether the harness tries the same call again after a failed ``attempt`` (1-based), read from
        ``result``, the tool_result content it built (module docstring: what each rule reads)."""
        if attempt >= self.max_attempts or not is_error:
            return False
        if self.policy_code is not None:
            return self.policy_code.should_retry(result)
        if self.retry_on == RetryRule.ALL:
            return True
        if self.retry_on == RetryRule.TRANSIENT:
            if self.error_format == ErrorFormat.STRUCTURED:
                return read_flag(result, self.retry_flag_path) is True
            return category == ErrorCategory.TRANSIENT
        return False

    def system_prompt(self, system: str) -> str:
        """The scenario's system prompt as this policy sends it."""
        if not self.ask_model_to_retry:
            return system
        return f"{system}\n\n{MODEL_RETRY_PROMPT}" if system else MODEL_RETRY_PROMPT

    def backoff(self, *, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before attempt ``attempt + 1``: exponential, bounded, with jitter."""
        delay = min(self.backoff_base_s * 2 ** (attempt - 1), self.backoff_max_s)
        if self.backoff_jitter:
            delay += delay * self.backoff_jitter * rng.random()
        return round(delay, 4)


# A harness that never waits before a retry, and one that nothing stops early (no consecutive-error
# guard, a fatal error is just another error): what the lessons' naive harnesses do.
NO_BACKOFF: dict[str, Any] = {"backoff_base_s": 0, "backoff_jitter": 0}
UNGUARDED: dict[str, Any] = {"consecutive_error_limit": None, "stop_on_fatal": False}

# Each preset says how it differs from the defaults above, which are the structured harness.
PRESETS: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy(
            name="fragile",
            description="Raises on any failure: the run dies with the exception.",
            error_format=ErrorFormat.RAISE,
            retry_on=RetryRule.NONE,
            max_attempts=1,
            clean_error_text=False,
            write_retries="blind",
            **NO_BACKOFF,
            **UNGUARDED,
        ),
        Policy(
            name="starter",
            description='Bare "Error", every failure tried three times (two retries), an empty result is an error.',
            error_format=ErrorFormat.BARE,
            retry_on=RetryRule.ALL,
            empty_is_error=True,
            clean_error_text=False,
            write_retries="blind",
            **NO_BACKOFF,
            **UNGUARDED,
        ),
        Policy(
            name="message",
            description="is_error with the exception's message; transient failures retried in code.",
            error_format=ErrorFormat.MESSAGE,
            backoff_jitter=0,
            consecutive_error_limit=None,
            clean_error_text=False,
            write_retries="never",
        ),
        Policy(
            name="structured",
            description="Category, isRetryable and message, internal details cleaned out; only transient "
            "retried, bounded, with jittered backoff; fatal stops the run; 3 consecutive errors stop the run.",
        ),
        Policy(
            name="model-retries",
            description="Structured errors; the harness never retries, and the system prompt asks the model "
            "to retry a retryable failure once (lesson 002's Agent SDK path).",
            retry_on=RetryRule.NONE,
            max_attempts=1,
            ask_model_to_retry=True,
        ),
        # The two lessons' mistakes below are structured with one setting changed, so a comparison
        # with structured isolates it.
        Policy(
            name="nested-flag-bug",
            description="Structured errors, but the retry rule reads isRetryable at the top level of the "
            "tool_result, one level above where it is, so a retryable failure is never retried "
            "(lesson 002's nested-flag bug).",
            retry_flag_path="isRetryable",
        ),
        Policy(
            name="swallowed-errors",
            description="Every failure becomes an empty result with no is_error, so the model takes it "
            "for nothing found (lesson 001's common mistake).",
            swallow_errors=True,
        ),
    )
}

PRESET_NAMES = tuple(PRESETS)


def with_code(policy: Policy, code: PolicyCode) -> Policy:
    """``policy`` running ``code``: the module's path and the hash of its source as loaded now."""
    made = policy.model_copy(update={"code": code.module, "code_sha256": code.sha256})
    made._code = code
    return made


def code_policy(module: str, *, listed: bool = True) -> Policy:
    """The policy of a policy module on its own: the structured harness's attempts, backoff and guards
    with the module's ``fail`` and ``should_retry``; named after the module's last part."""
    try:
        code = load_policy_code(module, listed=listed)
    except PolicyCodeError as exc:
        raise PolicyError({"code": str(exc)}) from None
    name = module.rsplit(".", 1)[-1].lower().lstrip("_")[:40] or "code"
    return with_code(
        PRESETS["structured"].model_copy(
            update={"name": name, "description": f"fail() and should_retry() from {module}"}
        ),
        code,
    )


def _field_messages(exc: ValidationError) -> dict[str, str]:
    out: dict[str, str] = {}
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "policy"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown setting; expected one of " + ", ".join(Policy.model_fields)
        out.setdefault(key, msg)
    return out


def policy_from_dict(data: dict[str, Any]) -> Policy:
    """Build a policy variant from a plain dict, optionally based on a preset (``"base": "structured"``).

    Raises ``PolicyError`` naming each invalid field and what is expected.
    """
    if not isinstance(data, dict):
        raise PolicyError({"policy": "expected a mapping of setting names to values"})
    data = dict(data)
    base_name = data.pop("base", None)
    merged: dict[str, Any] = {}
    if base_name:
        if base_name not in PRESETS:
            raise PolicyError({"base": f"unknown preset {base_name!r}; expected one of {', '.join(PRESETS)}"})
        merged = PRESETS[base_name].settings()
        if not data.get("description"):
            # The preset's own description would no longer be true of the variant: say what changed.
            changed = [f"{k}={v!r}" for k, v in data.items() if k != "name" and merged.get(k) != v]
            data["description"] = f"{base_name}" + (f" with {', '.join(changed)}" if changed else "")
    merged.update(data)
    try:
        made = Policy(**merged)
    except ValidationError as exc:
        raise PolicyError(_field_messages(exc)) from None
    if made.code is None:
        return made.model_copy(update={"code_sha256": None})
    try:
        return with_code(made, load_policy_code(made.code))
    except PolicyCodeError as exc:
        raise PolicyError({"code": str(exc)}) from None


def get_policy(name_or_settings: str | dict[str, Any]) -> Policy:
    if isinstance(name_or_settings, dict):
        return policy_from_dict(name_or_settings)
    if name_or_settings not in PRESETS:
        if name_or_settings in module_paths():
            return code_policy(name_or_settings)
        known = ", ".join([*PRESETS, *module_paths()])
        raise PolicyError({"policy": f"unknown policy {name_or_settings!r}; expected one of {known}"})
    return PRESETS[name_or_settings]
