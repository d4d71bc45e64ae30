"""The simulated model: deterministic rules, not Claude, served to the SDK as an HTTP transport.

It reads the tool_result in each request the way the lessons describe: it repairs a call when the
error names the argument and what is expected, explains a refusal that a retry cannot change, relays
what to do next when a transient failure ran out of retries, answers "no orders" for an empty
result, and gives up blaming a generic error when it was told only "Error". Each agent's persona
holds only its opening move (the realistic first mistake), the calls it would fall back to, and
whether it is a stuck model that repeats a call it cannot fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

from ..vocabulary import ErrorCategory, ModelBackendName
from .base import ModelBackend

MODEL_NAME = "simulated-rules-1"

ALLOWED_VALUES = re.compile(r"(?P<field>[\w.]+): Input should be (?P<values>'[^']*'(?:, '[^']*')*(?: or '[^']*')?)")
WRONG_FORMAT = re.compile(r"(?P<field>\w+) '(?P<value>[^']*)' is not in (?P<fmt>[YMD]{2,4}(?:-[YMD]{2,4})+) format")
STILL_FAILING = re.compile(r"still failing after (?P<n>\d+) attempts: (?P<what>.+?)(?: timed out)?(?:;|\.|$)")
DATE_READINGS = ("%d/%m/%Y", "%d.%m.%Y", "%d-%m-%Y", "%Y/%m/%d")

ACTIONS = {
    "convert_currency": "convert {amount} {from_currency} to {to_currency}",
    "free_slots": "check the room for {date}",
    "book_slot": "book the room for {date} at {time}",
    "lookup": "look up '{key}'",
    "lookup_orders": "look up your orders",
    "process_refund": "refund order {order_id}",
    "lookup_order": "look up order {order_id}",
    "callback_check": "check for a call back",
    "run_subagent": "check the orders",
}


@dataclass(frozen=True)
class Persona:
    """What the simulated model brings to one agent before reading any tool_result."""

    opening: tuple[tuple[str, dict[str, Any]], ...]  # the calls of its first turn
    alternatives: tuple[dict[str, Any], ...] = ()  # inputs it would try instead, in order
    repeats_when_stuck: bool = False  # repeats a call it cannot fix (the stuck model)
    coordinator: bool = False  # composes a report from its sub-agents' results


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

    @property
    def gives_no_reason(self) -> bool:
        return self.is_error and self.message.strip() in ("", "Error")


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
        elif isinstance(err, str):
            reading.message = err
    return reading


def action(reading: Reading) -> str:
    try:
        return ACTIONS[reading.name].format(**reading.input)
    except (KeyError, IndexError):
        return f"run {reading.name}"


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def full_stop(text: str) -> str:
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def join_and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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


def repair(reading: Reading, persona: Persona) -> tuple[dict[str, Any], str] | None:
    """A corrected input when the error names the argument and what it expects, with the reason said aloud."""
    for m in ALLOWED_VALUES.finditer(reading.message):
        allowed = re.findall(r"'([^']*)'", m.group("values"))
        name = m.group("field")
        for alternative in persona.alternatives:
            if str(alternative.get(name)) in allowed and alternative != reading.input:
                return dict(alternative), f"The tool accepts {name} {m.group('values')}; trying {alternative[name]}."
    m = WRONG_FORMAT.search(reading.message)
    if m and m.group("field") in reading.input:
        fixed = reformat_date(m.group("value"), m.group("fmt"))
        if fixed:
            return {**reading.input, m.group("field"): fixed}, f"Resending {m.group('field')} as {m.group('fmt')}."
    return None


def success_reply(r: Reading) -> str:
    d = r.data if isinstance(r.data, dict) else {}
    if r.name == "convert_currency":
        m = re.match(r"[\d.]+ (\w+) = ([\d.]+) (\w+)", r.text)
        if m:
            return f"{r.input.get('amount')} {m.group(1)} is about {m.group(2)} {m.group(3)}."
    if r.name == "free_slots" and "free" in d:
        free = d["free"]
        if not free:
            return f"The room is fully booked on {d['date']}."
        more = f" (and {len(free) - 4} more slots)" if len(free) > 4 else ""
        return f"On {d['date']} the room is free at: {', '.join(free[:4])}{more}."
    lists = {k: v for k, v in d.items() if isinstance(v, list)}
    if lists and not any(lists.values()):
        return f"You have no {next(iter(lists))} with us: the lookup found none."
    if r.name == "lookup_orders":
        listed = ", ".join(f"{o['order_id']} ({o['item']}, {o['status']})" for o in d["orders"])
        return f"Here are your orders: {listed}."
    if r.name == "lookup" and "value" in d:
        return f"The value for '{d['key']}' is {d['value']}."
    if r.name == "process_refund" and "refund_id" in d:
        return (
            f"Done: order {d['order_id']} is refunded and {d['amount']} goes back to your original payment "
            f"method (refund {d['refund_id']})."
        )
    if r.name == "lookup_order" and "status" in d:
        return f"Order {d['order_id']} found: {d['item']}, {d['status']}."
    if r.name == "callback_check":
        return f"Support can call {d.get('customer', 'the customer')} back ({d.get('call_back', 'soon')})."
    return f"Here is what came back: {r.text}"


def failure_reply(r: Reading, tools: list[str]) -> str:
    what, _, advice = r.message.partition("; ")
    if r.gives_no_reason:
        return (
            f"I wasn't able to {action(r)} because the system returned a generic error without saying why. "
            "Please contact us again to retry, or double-check the details if they don't look right."
        )
    if r.category == ErrorCategory.PERMISSION:
        reply = f"I can't {action(r)}: {lower_first(what.rstrip('.'))}"
        reply = full_stop(f"{reply}, so {to_user(advice)}" if advice else reply)
        if "lookup_orders" in tools and r.name != "lookup_orders":
            reply += " I can look up the orders on your own account if you'd like."
        return reply
    if r.category == ErrorCategory.BUSINESS:
        because = ", and ".join(lower_first(s.strip().rstrip(".")) for s in r.message.split(". ") if s.strip())
        return f"I'm sorry, but I couldn't {action(r)} because {because}."
    if r.category == ErrorCategory.VALIDATION:
        asked = next(iter(r.input), "input").replace("_", " ")
        return f"I couldn't {action(r)}. {full_stop(r.message)} Could you send me the corrected {asked}?"
    reply = f"I couldn't {action(r)}: {full_stop(lower_first(what))}"
    return f"{reply} {advice_sentence(advice)}" if advice else reply


def coordinator_reply(readings: list[Reading]) -> str:
    """Lesson 002's failed / tried / partial / next report, from what the sub-agents passed up."""
    if any(r.gives_no_reason for r in readings):
        return failure_reply(next(r for r in readings if r.gives_no_reason), [])
    found = [m.group(1) for r in readings if not r.is_error for m in [re.search(r"Order (\d{4}) found", r.text)] if m]
    call_back = any("call" in r.text and "back" in r.text for r in readings if not r.is_error)
    failures = [r for r in readings if r.is_error]
    if not failures:
        return f"All orders found: {join_and(found)}." if found else "Nothing to report."
    failed, tried, missing = [], [], []
    for r in failures:
        m = STILL_FAILING.search(r.message)
        if m:
            attempts = int(m.group("n"))
            timed_out = " timed out" in r.message[m.start() :]
            failed.append(f"{m.group('what')}, {'timed out' if timed_out else 'failed'} {times(attempts)}")
            tried.append(f"retried {times(attempts - 1)}, locally" if attempts > 1 else "not retried")
        else:
            failed.append(r.message)
            tried.append("not retried")
        missing += re.findall(r"order (\d{4})", r.message)[:1]
    partial = f"orders {join_and(found)} found" if found else "nothing found"
    if missing:
        partial += f", {join_and(missing)} not checked"
    next_step = (
        "the customer can wait for a call back or ask again" if call_back else "the customer can ask again later"
    )
    return "\n".join(
        [
            f"failed:  {'; '.join(failed)}",
            f"tried:   {'; '.join(tried)}",
            f"partial: {partial}",
            f"next:    {next_step}",
        ]
    )


class SimulatedModel:
    """Answers one Messages API request with the next move, by the rules above."""

    def __init__(self, persona: Persona) -> None:
        self.persona = persona

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
            "stop_reason": "tool_use" if uses_tool else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": len(json.dumps(content)) // 4},
        }

    def next_move(self, body: dict[str, Any], turn: int) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
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
        readings = [read_result(b, calls.get(b.get("tool_use_id"), {})) for b in results]
        if self.persona.coordinator:
            return [_text(coordinator_reply(readings))]
        r = readings[-1]
        if not r.is_error:
            return [_text(success_reply(r))]
        repaired = repair(r, self.persona)
        if repaired:
            args, said = repaired
            return [_text(said), self._use(r.name, args, turn, 0)]
        if self.persona.repeats_when_stuck:
            return [_text("Trying that again."), self._use(r.name, r.input, turn, 0)]
        return [_text(failure_reply(r, [t.get("name") for t in body.get("tools") or []]))]

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
