"""The optional model judge: Claude, through the ``anthropic`` SDK, reads a finished run against a rubric
built from its scenario's facts (the names of the checks its rules judge has, ``Scenario.judge_checks``:
the facts of ``agents.lesson_facts`` as the lessons word them) and answers pass or fail with a one-line
rationale. Its verdict is stored beside the rules' verdict, never instead of it; the two disagreeing marks
the run for review.

Never on by default (``--judge claude``). It needs ``ANTHROPIC_API_KEY``; the model is
``RLT_JUDGE_MODEL``, else ``ANTHROPIC_MODEL``, else the ``claude`` backend's default. A failure (no key,
an API error, an answer that is not the JSON asked for) leaves the model verdict empty with the reason:
the run, and its rules verdict, are untouched.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import anthropic

from .events import ModelVerdict
from .vocabulary import CLAUDE_DEFAULT_MODEL

RATIONALE_MAX = 300  # characters of the one-line rationale kept
SHOWN_MAX = 1500  # characters of a tool result or an answer put in the prompt
TIMEOUT_S = 60.0

SYSTEM = (
    "You judge one run of a tool-using customer-service agent. You are given the task, what the scenario "
    "tests, the facts a right run must hold (the rubric), every tool call with its result, and the agent's "
    "final answer. Judge by meaning, not wording: a fact worded differently still holds; an answer that "
    "claims something the tool results contradict fails. Reply with one JSON object and nothing else: "
    '{"verdict": "pass" or "fail", "rationale": "one sentence naming the fact that decided it"}.'
)


def judge_model() -> str:
    return (
        os.environ.get("RLT_JUDGE_MODEL", "").strip()
        or os.environ.get("ANTHROPIC_MODEL", "").strip()
        or CLAUDE_DEFAULT_MODEL
    )


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 1] + "…"


def rubric(scenario: Any) -> str:
    """The scenario's facts as a numbered rubric: every one must hold for the run to pass."""
    facts = list(getattr(scenario, "judge_checks", []) or [])
    lines = [f"{i}. {fact}" for i, fact in enumerate(facts, 1)]
    return "\n".join(lines) or "1. the answer does what the task asks, true to the tool results"


def prompt(scenario: Any, result: Any) -> str:
    """The user turn: the task, what the scenario tests, the rubric, the tool calls and the final answer."""
    calls = []
    for step in result.steps:
        if step.tool_name:
            outcome = "error" if step.is_error else "ok"
            calls.append(
                f"- {step.tool_name}({_shown(step.input or {})}) → {outcome}: {_shown(step.result_content)}"
                + (f" (tried {step.retry_count + 1} times)" if step.retry_count else "")
            )
    answer = result.end.final_answer
    return "\n\n".join(
        [
            f"Task given to the agent:\n{scenario.task}",
            f"What this scenario tests:\n{getattr(scenario, 'description', '') or scenario.title}",
            f"Rubric (every fact must hold to pass):\n{rubric(scenario)}",
            "Tool calls, in order:\n" + ("\n".join(calls) or "(none)"),
            f"How the run ended: {result.end.stop_reason}",
            "Final answer:\n" + (_shown(answer) if answer else "(no final answer)"),
        ]
    )


_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse(text: str) -> tuple[str, str]:
    """(verdict, rationale) from the model's reply; ``ValueError`` naming what is wrong with it."""
    found = _OBJECT.search(text or "")
    if not found:
        raise ValueError(f"the answer holds no JSON object: {_shown(text)[:200]!r}")
    try:
        data = json.loads(found.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer's JSON does not parse ({exc.msg}): {found.group(0)[:200]!r}") from None
    if not isinstance(data, dict):
        raise ValueError("the answer's JSON is not an object")
    verdict = str(data.get("verdict", "")).strip().lower()
    if verdict not in ("pass", "fail"):
        raise ValueError(f"verdict: expected 'pass' or 'fail', got {data.get('verdict')!r}")
    rationale = " ".join(str(data.get("rationale") or "").split())
    if not rationale:
        raise ValueError("rationale: the answer gives none")
    return verdict, rationale[:RATIONALE_MAX]


def model_judge(scenario: Any, result: Any, *, client: Any = None, model: str | None = None) -> ModelVerdict:
    """Ask Claude to judge ``result`` (a finished ``RunResult``) of ``scenario``. Never raises: a failure
    is a ``ModelVerdict`` with no verdict and the reason."""
    model = model or judge_model()
    try:
        if client is None:
            key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
            if not key:
                return ModelVerdict(model, error="ANTHROPIC_API_KEY is not set")
            client = anthropic.Anthropic(api_key=key, timeout=TIMEOUT_S, max_retries=2)
        message = client.messages.create(
            model=model,
            max_tokens=300,
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt(scenario, result)}],
        )
        text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
        verdict, rationale = parse(text)
        return ModelVerdict(model, verdict=verdict, rationale=rationale)
    except anthropic.APIStatusError as exc:
        return ModelVerdict(model, error=f"the API answered {exc.status_code}: {_api_message(exc)}")
    except anthropic.APIConnectionError as exc:
        return ModelVerdict(model, error=f"no answer from the API ({type(exc).__name__}: {exc})")
    except ValueError as exc:
        return ModelVerdict(model, error=f"unparseable answer: {exc}")
    except Exception as exc:  # anything else the SDK or the reply does: no verdict, never a crashed run
        return ModelVerdict(model, error=f"{type(exc).__name__}: {exc}")


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or exc)
    return str(getattr(exc, "message", "") or exc)
