"""Anthropic Messages transcripts (``{"model", "system", "tools", "messages"}``, as the API takes
them) as runs: the file and API source of whole conversations (``docs/formats.md``).

The conversation itself is read by ``intake.conversation`` (the same reading OTLP traces get); this
module adds what a transcript file says around it: the model's name, the task (the first user text),
the stop reason (``final_answer`` when the last assistant turn asks for no tool, else unknown), and
the transcript kept on the run. Scenario, policy and the rest come from the importer, since a
transcript does not say them. A malformed transcript raises ``IngestError`` with the path of each
problem (``messages[4].content[0].tool_use_id``); nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.events import RunEnd
from agents.vocabulary import StopReason

from . import conversation
from .errors import IngestError, shown
from .record import Arrival, run_start_of
from .schema import storable

MODEL_MAX = 100


def transcript_arrival(
    *,
    transcript: Any,
    source: str = "import",
    owner: Any = None,
    source_detail: str = "",
    scenario: str = "",
    policy: str = "",
) -> Arrival:
    """A Messages API transcript as a finished run from outside (``intake.record.Arrival``)."""
    if not isinstance(transcript, Mapping):
        raise IngestError.one("", f"expected a Messages transcript (a JSON object); got {type(transcript).__name__}")
    messages = transcript.get("messages")
    if not isinstance(messages, list) or not messages:
        raise IngestError.one("messages", "expected a non-empty list of messages")
    errors: list[dict[str, str]] = []
    model = transcript.get("model", "")
    if model is not None and not isinstance(model, str):
        errors.append({"path": "model", "message": f"expected a string; got {shown(model)}"})
        model = ""
    elif model and len(model) > MODEL_MAX:
        errors.append({"path": "model", "message": f"expected at most {MODEL_MAX} characters; got {len(model)}"})
    turns = conversation.messages_turns(messages, errors)
    reading = conversation.turns_steps(turns, errors)
    storable(transcript, "", errors)
    if errors:
        raise IngestError(errors)
    ended = reading.final is not None
    return Arrival(
        source=source,
        owner=owner,
        source_detail=source_detail,
        start=run_start_of(scenario=scenario, policy=policy, model=model or "", task=reading.task),
        steps=reading.steps,
        end=RunEnd(
            stop_reason=StopReason.FINAL_ANSWER.value if ended else "",
            final_answer=reading.final or "",
            transcript=dict(transcript),
        ),
    )
