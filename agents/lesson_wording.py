"""The lessons' own sentences for the simulated model: a ``Wording`` the lessons' pack gives its personas.

The simulated model's rules are generic (``agents.llm.simulated``); this only phrases what they
decide in the words the lessons print ("100 USD is about 92.0 EUR.", "On 2026-10-02 the room is free
at: …", lesson 002's failed / tried / partial / next report). A pack without a persona never sees it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .persona import Wording

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
    "lookup_invoice": "look up invoice {invoice_id}",
    "charge_card": "pay for order {order_id}",
}

TRIED = re.compile(r" \((?P<what>tried \w+(?: times)?: [^)]+)\)$")
STILL_FAILING = re.compile(r"still failing after (?P<n>\d+) attempts: (?P<what>.+?)(?: timed out)?(?:;|\.|$)")


def times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def join_and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class LessonWording(Wording):
    def action(self, name: str, input: dict[str, Any]) -> str | None:
        try:
            return ACTIONS[name].format(**input)
        except (KeyError, IndexError):
            return None

    def success(self, r: Any) -> str | None:
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
        if r.name == "charge_card" and d.get("status") == "charged":
            return f"Your card was charged {d['amount']} EUR for order {d['order_id']} (payment {d['charge_id']})."
        if r.name == "lookup_orders" and d.get("orders"):
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
        return None

    def offer(self, reading: Any, tools: list[str]) -> str:
        if "lookup_orders" in tools and reading.name != "lookup_orders":
            return "I can look up the orders on your own account if you'd like."
        return ""

    def report(self, readings: list[Any]) -> str | None:
        """Lesson 002's failed / tried / partial / next report, from what the sub-agents passed up."""
        if any(r.gives_no_reason for r in readings):
            return None  # the generic rules answer a bare "Error"
        found = [
            m.group(1) for r in readings if not r.is_error for m in [re.search(r"Order (\d{4}) found", r.text)] if m
        ]
        call_back = any("call" in r.text and "back" in r.text for r in readings if not r.is_error)
        failures = [r for r in readings if r.is_error]
        if not failures:
            return f"All orders found: {join_and(found)}." if found else "Nothing to report."
        failed, tried, missing = [], [], []
        for r in failures:
            said = TRIED.search(r.message)
            if said:  # the sub-agent says what was tried: its model sent the call again
                r = replace(r, message=r.message[: said.start()].rstrip())
            m = STILL_FAILING.search(r.message)
            if said:
                failed.append(r.message)
                tried.append(said.group("what"))
            elif m:
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


LESSONS = LessonWording()
