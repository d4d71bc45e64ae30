"""Runs from outside as their senders write them, for the intake's tests: run documents, Messages
transcripts, JSON Lines, and the helpers that import or refuse them."""

from __future__ import annotations

import json

import pytest

from tracer.intake import files
from tracer.intake.errors import IngestError
from tracer.models import Run

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."


def structured_error(category: str, message: str, retryable: bool = False) -> str:
    return json.dumps(
        {"isError": True, "error": {"errorCategory": category, "isRetryable": retryable, "message": message}}
    )


def document(**run) -> dict:
    """The lesson's refund-too-old run under structured errors, as a run document."""
    return {
        "format": "rlt.run/1",
        "run": {"scenario": "refund-too-old", "policy": "structured", "model": "claude-haiku-4-5", **run},
        "steps": [
            {
                "index": 1,
                "kind": "tool_use",
                "tool_name": "process_refund",
                "tool_use_id": "toolu_01",
                "input": {"order_id": "0871"},
                "attempts": [
                    {"number": 1, "ok": False, "category": "business", "retryable": False, "message": TOO_OLD}
                ],
                "input_tokens": 120,
                "output_tokens": 30,
            },
            {"index": 2, "kind": "final_answer", "text": "I couldn't refund order 0871.", "output_tokens": 40},
        ],
    }


def imported(data: dict, **kwargs) -> Run:
    run = files.run_import(arrival=files.item_arrival(data=data, **kwargs))
    run.refresh_from_db()
    return run


def refused(data) -> list[dict[str, str]]:
    with pytest.raises(IngestError) as caught:
        files.item_arrival(data=data)
    return caught.value.errors


def tool_use(use_id: str, name: str = "process_refund", **input) -> dict:
    return {"type": "tool_use", "id": use_id, "name": name, "input": input or {"order_id": "0871"}}


def tool_result(use_id: str, content, is_error: bool | None = None) -> dict:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


TASK = "Please refund order 0871, the laptop stand is wobbly."


def starter_transcript() -> dict:
    """Three bare "Error"s, the model repeating the call each time, then a guess."""
    messages = [{"role": "user", "content": TASK}]
    for n in (1, 2, 3):
        messages.append({"role": "assistant", "content": [tool_use(f"toolu_0{n}")]})
        messages.append(
            {"role": "user", "content": [tool_result(f"toolu_0{n}", '{"error": {"message": "Error"}}', True)]}
        )
    messages.append({"role": "assistant", "content": "The system returned a generic error."})
    return {"model": "claude-haiku-4-5", "system": "You are Lumen Supply's agent.", "tools": [], "messages": messages}


def structured_transcript() -> dict:
    return {
        "model": "claude-haiku-4-5",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": TASK}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Refunding."}, tool_use("toolu_01")]},
            {
                "role": "user",
                "content": [
                    tool_result("toolu_01", [{"type": "text", "text": structured_error("business", TOO_OLD)}], True)
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Refunds close after 30 days."}]},
        ],
    }


def jsonl(*items) -> bytes:
    return "\n".join(item if isinstance(item, str) else json.dumps(item) for item in items).encode()
