"""The simulated model: deterministic rules, not Claude, served to the SDK as an HTTP transport.

It reads only the tool_results of the last turn (and the calls they answer, which it made itself),
and the rules are generic, so they work on any scenario pack (docs/packs.md, "The simulated model"):

1. First turn: the scenario's opening call(s), which the scenario declares as data.
2. A result that is not an error: it answers from what came back ("You have no orders with us" for
   a result whose lists are all empty).
3. An error that says to use another of the request's tools first (``use search_customers to find
   the id first``): that tool, its one required text field filled with the value the error quotes;
   when that tool then returns exactly one record holding a field of the failed call, the failed
   call again with the record's value for it.
3a. An error that names the offending field and what is expected, when its category (if it carries
   one) is ``validation``: the same call, repaired —
   ``field: Input should be 'A', 'B' or 'C'`` (the persona's alternative input holding one of those
   values, else the allowed value closest to what was sent); ``field: Input should be greater than 0``
   (a negative number sent with its sign dropped, when that is enough); ``field 'value' is not in YYYY-MM-DD
   format`` (the same date in that format); ``unknown thing 'value'; valid things: a, b, c`` (also
   "known …:", "expected one of …") (the listed value closest to the one sent). Never an input it
   already sent to that tool. A failure whose category says the input is not the problem
   (``permission``, ``business``, ``transient``) is never "repaired", whatever its message suggests.
4. A stuck persona repeats the call it cannot fix.
5. A failure that says a retry can help (``isRetryable`` true or category ``transient``) and does not
   say the harness already ran out of attempts ("still failing after N attempts"), when the system
   prompt asks for that ("… call the same tool again once …", "retry … twice"): the same call again,
   as many times as it asks. Without such a line it does not retry a failure itself (lesson 001:
   retries belong in code; lesson 002: "the prompt asks for one retry").
6. A bare "Error": the same call again, once (``Persona.bare_error_repeats``; the lessons' personas
   give up at once); then it gives up, blaming a generic error.
7. Anything else: it explains, using the message: a permission refusal (what to do instead), a
   business refusal (why), a validation error (asks for a corrected value), else what failed and what
   to do next.

Nothing here knows a pack's tools: a persona (``agents.persona``) holds the scenario's opening calls
and, for the lessons only, a ``Wording`` with the lessons' exact sentences.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

from ..persona import Call, Persona, Wording
from ..vocabulary import SIMULATED_MODEL_NAME, ApiStopReason, ErrorCategory, ModelBackendName
from .base import ModelBackend

__all__ = ["MODEL_NAME", "Call", "Persona", "SimulatedBackend", "SimulatedModel", "SimulatedTransport"]

MODEL_NAME = SIMULATED_MODEL_NAME

ALLOWED_VALUES = re.compile(r"(?P<field>[\w.]+): Input should be (?P<values>'[^']*'(?:, '[^']*')*(?: or '[^']*')?)")
GREATER_THAN = re.compile(r"(?P<field>[\w.]+): Input should be greater than (?P<bound>-?\d+(?:\.\d+)?)")
WRONG_FORMAT = re.compile(r"(?P<field>\w+) '(?P<value>[^']*)' is not in (?P<fmt>[YMD]{2,4}(?:-[YMD]{2,4})+) format")
LISTED_VALUES = re.compile(
    r"'(?P<value>[^']+)'[^;]*;\s*(?:valid|known|available|allowed|expected one of)\b[^:]*:\s*"
    r"(?P<values>[^;]+?)\s*(?:;|\.\s|\.?$)"
)
EXHAUSTED = "still failing after"
USE_TOOL = re.compile(r"\buse (?P<tool>[A-Za-z0-9_-]+) to (?:find|look up|search)")
QUOTED = re.compile(r"'(?P<value>[^']+)'")
PROMPTED_RETRIES = re.compile(r"\b(?:again|retry)\b[^.;]{0,60}?\b(?P<times>once|twice|three times)\b", re.IGNORECASE)
TIMES = {"once": 1, "twice": 2, "three times": 3}
DATE_READINGS = ("%d/%m/%Y", "%d.%m.%Y", "%d-%m-%Y", "%Y/%m/%d")
GENERIC = Wording()


@dataclass
class Reading:
    """One tool_result as the model reads it, joined to the tool_use it answers."""

    name: str
    input: dict[str, Any]
    is_error: bool
    text: str
    data: Any = None
    category: str | None = None
    message: str = ""
    retryable: bool | None = None

    @property
    def gives_no_reason(self) -> bool:
        return self.is_error and self.message.strip() in ("", "Error")

    @property
    def says_retry_helps(self) -> bool:
        """The failure says a retry can help, and not that the harness already ran out of attempts."""
        hopeful = self.retryable is True or self.category == ErrorCategory.TRANSIENT
        return self.is_error and hopeful and EXHAUSTED not in self.message

    def same_call(self, other: Reading) -> bool:
        return self.name == other.name and self.input == other.input


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def read_result(block: dict[str, Any], call: dict[str, Any]) -> Reading:
    text = _text_of(block.get("content"))
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    reading = Reading(
        call.get("name", ""), call.get("input") or {}, bool(block.get("is_error")), text, data, message=text
    )
    if reading.is_error and isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            reading.category = err.get("errorCategory")
            reading.message = str(err.get("message", ""))
            flag = err.get("isRetryable")
            reading.retryable = flag if isinstance(flag, bool) else None
        elif isinstance(err, str):
            reading.message = err
    return reading


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def full_stop(text: str) -> str:
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def to_user(advice: str) -> str:
    """Advice written for the model, turned to the person.

    "ask the user to X themselves" becomes "you'll need to X yourself".
    """
    m = re.fullmatch(r"ask the (?:user|customer) to (.+?)(?: themselves)?", advice.strip())
    return f"you'll need to {m.group(1)} yourself" if m else advice


def advice_sentence(advice: str) -> str:
    said = to_user(advice)
    return full_stop(said[0].upper() + said[1:] if said != advice else f"Please {advice}")


def reformat_date(value: str, fmt: str) -> str | None:
    target = fmt.replace("YYYY", "%Y").replace("MM", "%m").replace("DD", "%d")
    for reading in DATE_READINGS:
        try:
            return datetime.strptime(value, reading).strftime(target)  # noqa: DTZ007 - a date, no time zone
        except ValueError:
            continue
    return None


def closest(sent: Any, allowed: list[str]) -> str:
    """The allowed value most like the one sent (case-insensitive); the first listed on a tie."""
    said = str(sent).lower()
    return max(allowed, key=lambda v: (difflib.SequenceMatcher(None, said, v.lower()).ratio(), -allowed.index(v)))


def split_values(values: str) -> list[str]:
    parts = re.split(r",\s*|\s+or\s+|\s+and\s+", values.strip().rstrip("."))
    return [p.strip().strip("'\"") for p in parts if p.strip().strip("'\"")]


def repair(reading: Reading, persona: Persona, tried: list[dict[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """A corrected input when the error names the argument and what it expects, with the reason said aloud.

    ``tried`` holds every input already sent to this tool: none of them is proposed again.
    """
    if reading.category not in (None, ErrorCategory.VALIDATION):
        return None  # the category says the input is not the problem, whatever the message suggests
    for m in ALLOWED_VALUES.finditer(reading.message):
        allowed = re.findall(r"'([^']*)'", m.group("values"))
        name = m.group("field")
        for alternative in persona.alternatives:
            if str(alternative.get(name)) in allowed and alternative not in tried:
                return dict(alternative), f"The tool accepts {name} {m.group('values')}; trying {alternative[name]}."
        if name in reading.input:
            untried = [v for v in allowed if {**reading.input, name: v} not in tried]
            if untried:
                value = closest(reading.input[name], untried)
                return {**reading.input, name: value}, f"The tool accepts {name} {m.group('values')}; trying {value}."
    for m in GREATER_THAN.finditer(reading.message):
        name, bound = m.group("field"), float(m.group("bound"))
        sent = reading.input.get(name)
        if isinstance(sent, int | float) and not isinstance(sent, bool) and sent < 0 and -sent > bound:
            fixed = {**reading.input, name: -sent}
            if fixed not in tried:
                return fixed, f"The tool needs {name} greater than {m.group('bound')}; resending it as {-sent:g}."
    m = WRONG_FORMAT.search(reading.message)
    if m and m.group("field") in reading.input:
        fixed = reformat_date(m.group("value"), m.group("fmt"))
        if fixed and {**reading.input, m.group("field"): fixed} not in tried:
            return {**reading.input, m.group("field"): fixed}, f"Resending {m.group('field')} as {m.group('fmt')}."
    for m in LISTED_VALUES.finditer(reading.message):
        sent = m.group("value")
        name = next((k for k, v in reading.input.items() if str(v) == sent), None)
        if name is None:
            continue
        untried = [v for v in split_values(m.group("values")) if {**reading.input, name: v} not in tried]
        if untried:
            value = closest(sent, untried)
            return {
                **reading.input,
                name: value,
            }, f"The error lists the {name.replace('_', ' ')} values it knows; trying {value}."
    return None


def prompted_retries(system: Any) -> int:
    """How many times the system prompt asks the model to retry a failure that says a retry can help (0: none)."""
    text = _text_of(system)
    m = PROMPTED_RETRIES.search(text)
    return TIMES[m.group("times").lower()] if m else 0


def search_first(
    r: Reading, tools: list[dict[str, Any]], history: list[Reading]
) -> tuple[tuple[str, dict[str, Any]], str] | None:
    """The search an error points to ("use search_customers to find the id first"), never sent twice."""
    m = USE_TOOL.search(r.message)
    quoted = QUOTED.search(r.message)
    if not m or not quoted:
        return None
    schema = next((t.get("input_schema") or {} for t in tools if t.get("name") == m.group("tool")), None)
    if schema is None:
        return None
    props = schema.get("properties") or {}
    text_fields = [k for k in schema.get("required") or props if (props.get(k) or {}).get("type") == "string"]
    if len(text_fields) != 1:
        return None
    args = {text_fields[0]: quoted.group("value")}
    if any(h.name == m.group("tool") and h.input == args for h in history):
        return None
    return (
        m.group("tool"),
        args,
    ), f"The error says to use {m.group('tool')} first; searching for {args[text_fields[0]]}."


def resend_after_search(
    readings: list[Reading], history: list[Reading]
) -> tuple[tuple[str, dict[str, Any]], str] | None:
    """After the search an error pointed to found exactly one record: the failed call, with the record's value."""
    if len(readings) != 1:
        return None
    found = readings[0]
    records = [v for v in (found.data or {}).values() if isinstance(v, list)] if isinstance(found.data, dict) else []
    if len(records) != 1 or len(records[0]) != 1 or not isinstance(records[0][0], dict):
        return None
    record = records[0][0]
    for earlier in reversed(history[:-1]):
        m = USE_TOOL.search(earlier.message) if earlier.is_error else None
        if not m or m.group("tool") != found.name:
            continue
        shared = [k for k in earlier.input if k in record]
        if not shared:
            return None
        args = {**earlier.input, **{k: record[k] for k in shared}}
        if any(h.name == earlier.name and h.input == args for h in history):
            return None
        return (
            earlier.name,
            args,
        ), f"{found.name} found it; sending {earlier.name} again with {shared[0]} {record[shared[0]]}."
    return None


def summarise(value: Any) -> str:
    """A tool's JSON result as a sentence fragment: every field and value, nothing left out."""
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {summarise(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(f"({summarise(v)})" if isinstance(v, dict) else summarise(v) for v in value) or "none"
    return str(value)


class SimulatedModel:
    """Answers one Messages API request with the next move, by the rules above."""

    def __init__(self, persona: Persona) -> None:
        self.persona = persona
        self.wording = persona.wording or GENERIC
        self.descriptions: dict[str, str] = {}  # tool name -> description, from the request being answered

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        content = self.next_move(body, turn)
        uses_tool = any(b["type"] == "tool_use" for b in content)
        return {
            "id": f"msg_sim_{turn:03d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", MODEL_NAME),
            "content": content,
            "stop_reason": ApiStopReason.TOOL_USE if uses_tool else ApiStopReason.END_TURN,
            "stop_sequence": None,
            "usage": {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": len(json.dumps(content)) // 4},
        }

    # --- wording ----------------------------------------------------------------------------

    def action(self, r: Reading) -> str:
        said = self.wording.action(r.name, r.input)
        if said:
            return said
        description = self.descriptions.get(r.name, "").strip()
        first = re.split(r"(?<=[.!?])\s|\n", description, maxsplit=1)[0].rstrip(".!? ") if description else ""
        return lower_first(first) if first and len(first) <= 80 else f"run {r.name}"

    def success_reply(self, r: Reading) -> str:
        said = self.wording.success(r)
        if said:
            return said
        d = r.data if isinstance(r.data, dict) else {}
        lists = {k: v for k, v in d.items() if isinstance(v, list)}
        if lists and not any(lists.values()):
            return f"You have no {next(iter(lists))} with us: the lookup found none."
        found = summarise(r.data) if r.data is not None else r.text
        return full_stop(f"Here is what {r.name} returned: {found}")

    def failure_reply(self, r: Reading, tools: list[str]) -> str:
        what, _, advice = r.message.partition("; ")
        if r.gives_no_reason:
            return (
                f"I wasn't able to {self.action(r)} because the system returned a generic error without saying why. "
                "Please contact us again to retry, or double-check the details if they don't look right."
            )
        if r.category == ErrorCategory.PERMISSION:
            reply = f"I can't {self.action(r)}: {lower_first(what.rstrip('.'))}"
            reply = full_stop(f"{reply}, so {to_user(advice)}" if advice else reply)
            offer = self.wording.offer(r, tools)
            return f"{reply} {offer}" if offer else reply
        if r.category == ErrorCategory.BUSINESS:
            because = ", and ".join(lower_first(s.strip().rstrip(".")) for s in r.message.split(". ") if s.strip())
            return f"I'm sorry, but I couldn't {self.action(r)} because {because}."
        if r.category == ErrorCategory.VALIDATION:
            asked = next(iter(r.input), "input").replace("_", " ")
            return f"I couldn't {self.action(r)}. {full_stop(r.message)} Could you send me the corrected {asked}?"
        reply = f"I couldn't {self.action(r)}: {full_stop(lower_first(what))}"
        return f"{reply} {advice_sentence(advice)}" if advice else reply

    # --- the rules --------------------------------------------------------------------------

    def next_move(self, body: dict[str, Any], turn: int) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        self.descriptions = {t.get("name", ""): t.get("description") or "" for t in tools}
        last = messages[-1].get("content") if messages else None
        results = (
            [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(last, list)
            else []
        )
        if not results:
            return [self._use(name, args, turn, k) for k, (name, args) in enumerate(self.persona.opening)]
        calls = {
            b["id"]: b
            for m in messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        }
        history = [
            read_result(b, calls.get(b.get("tool_use_id"), {}))
            for m in messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        readings = history[-len(results) :]
        if self.persona.coordinator:
            report = self.wording.report(readings)
            if report is not None:
                return [_text(report)]
        errors = [r for r in readings if r.is_error]
        if not errors:
            resend = resend_after_search(readings, history)
            if resend:
                (name, args), said = resend
                return [_text(said), self._use(name, args, turn, 0)]
            return [_text(" ".join(self.success_reply(r) for r in readings))]
        r = errors[0]
        tried = [h.input for h in history if h.name == r.name]
        search = search_first(r, tools, history)
        if search:
            (name, args), said = search
            return [_text(said), self._use(name, args, turn, 0)]
        repaired = repair(r, self.persona, tried)
        if repaired:
            args, said = repaired
            return [_text(said), self._use(r.name, args, turn, 0)]
        if self.persona.repeats_when_stuck:
            return [_text("Trying that again."), self._use(r.name, r.input, turn, 0)]
        same = [h for h in history if h.same_call(r)]
        asked = prompted_retries(body.get("system"))
        if r.says_retry_helps and sum(h.says_retry_helps for h in same) <= asked:
            return [_text("The tool says a retry can help; trying again."), self._use(r.name, r.input, turn, 0)]
        if r.gives_no_reason and sum(h.gives_no_reason for h in same) <= self.persona.bare_error_repeats:
            return [
                _text('The tool said only "Error"; trying the same call again.'),
                self._use(r.name, r.input, turn, 0),
            ]
        return [_text(self.failure_reply(r, [t.get("name") for t in tools]))]

    @staticmethod
    def _use(name: str, args: dict[str, Any], turn: int, k: int) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_sim_{turn:03d}_{k}", "name": name, "input": dict(args)}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@dataclass
class SimulatedTransport(httpx2.BaseTransport):
    persona: Persona
    model: SimulatedModel = field(init=False)

    def __post_init__(self) -> None:
        self.model = SimulatedModel(self.persona)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/v1/messages"):
            return httpx2.Response(
                404,
                json={
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "only /v1/messages is simulated"},
                },
            )
        return httpx2.Response(200, json=self.model.respond(json.loads(request.read())))


class SimulatedBackend(ModelBackend):
    kind = ModelBackendName.SIMULATED
    label = "simulated (deterministic rules, not Claude)"

    def __init__(self, *, record_to: str | Path | None = None) -> None:
        super().__init__(MODEL_NAME, record_to=record_to)

    def transport(self, persona: Persona) -> httpx2.BaseTransport:
        return SimulatedTransport(persona)
