"""Scenarios: a task, its tools, a fresh world per run, the model's opening move, and an expectation.

An expectation judges the right behaviour for the user, so a run under a weak policy can fail its
verdict: that difference is what the dashboard exists to show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from .errors import ToolFailure
from .events import StepEvent, Verdict
from .llm.simulated import Persona
from .loop import AgentSpec, RunResult, Session
from .tools import Tool, Toolbox
from .tools.currency import currency_tools
from .tools.lookup import FlakyUpstream
from .tools.lumen import LumenWorld, PaymentService
from .tools.rooms import Rooms
from .vocabulary import ErrorCategory, StepKind, StopReason

ASSISTANT = "You are a helpful assistant. Use the tools when they help, and answer the user plainly."
Judge = Callable[[RunResult], Verdict]


@dataclass
class Built:
    """One run's fresh world, as the agent sees it, and how its outcome is judged."""

    toolbox: Toolbox
    persona: Persona
    judge: Judge
    system: str = ASSISTANT


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    task: str
    description: str
    build: Callable[[Session], Built]

    def spec(self, built: Built) -> AgentSpec:
        return AgentSpec(
            scenario=self.name, task=self.task, system=built.system, toolbox=built.toolbox, persona=built.persona
        )


def lumen_system(customer: str) -> str:
    return (
        f"You are the support agent for Lumen Supply, an online electronics shop, helping {customer}. "
        "Explain a refusal plainly and never share another customer's details."
    )


def calls(result: RunResult, tool: str) -> list[StepEvent]:
    return [s for s in result.steps if s.kind == StepKind.TOOL_USE and s.tool_name == tool]


def attempts(result: RunResult, tool: str) -> int:
    return sum(len(s.attempts) for s in calls(result, tool))


def unanswered(result: RunResult) -> Verdict | None:
    """A failing verdict when the run ended without a final answer."""
    end = result.end
    if end.stop_reason == StopReason.FINAL_ANSWER:
        return None
    why = (end.error or end.guard or "no reason given").splitlines()[0]
    return Verdict(False, f"the run ended {end.stop_reason} ({why}) without answering the user")


def answer_of(result: RunResult) -> str:
    return result.end.final_answer or ""


def expect_answer(*needles: str, tool: str, max_attempts: int | None = None, why: str) -> Judge:
    """Pass when the run answered, the answer says every needle, and ``tool`` was not tried too often."""

    def judge(result: RunResult) -> Verdict:
        if failed := unanswered(result):
            return failed
        tried = attempts(result, tool)
        if max_attempts is not None and tried > max_attempts:
            return Verdict(False, f"{tool} was tried {tried} times; {why}")
        missing = [n for n in needles if n not in answer_of(result)]
        if missing:
            return Verdict(False, f"the answer does not say {' / '.join(repr(n) for n in missing)}")
        return Verdict(True, f"answered with {' / '.join(repr(n) for n in needles)} after {tried} attempt(s) of {tool}")

    return judge


def _currency(session: Session) -> Built:
    return Built(
        Toolbox(currency_tools()),
        Persona(
            opening=(("convert_currency", {"amount": 100, "from_currency": "GBP", "to_currency": "USD"}),),
            alternatives=({"amount": 100, "from_currency": "USD", "to_currency": "EUR"},),
        ),
        expect_answer(
            "92.0 EUR", tool="convert_currency", why="the repair needs the error's allowed values, not a retry"
        ),
    )


def _room_date(session: Session) -> Built:
    return Built(
        Toolbox(Rooms().tools()),
        Persona(opening=(("free_slots", {"date": "02/10/2026"}),)),
        expect_answer(
            "10:00, 11:00, 12:00, 13:00",
            tool="free_slots",
            why="the date must be resent in YYYY-MM-DD, not retried as it was",
        ),
    )


def _room_book(session: Session) -> Built:
    return Built(
        Toolbox(Rooms().tools()),
        Persona(opening=(("book_slot", {"date": "2026-10-02", "time": "10:00"}),)),
        expect_answer(
            "manager approval", tool="book_slot", max_attempts=1, why="a permission refusal does not change on retry"
        ),
    )


def _flaky(failures: int, *needles: str) -> Callable[[Session], Built]:
    def build(session: Session) -> Built:
        return Built(
            Toolbox(FlakyUpstream(failures).tools()),
            Persona(opening=(("lookup", {"key": "answer"}),)),
            expect_answer(*needles, tool="lookup", why="the model must not spend its turns on a 503"),
        )

    return build


def _refund_refused(order_id: str, *needles: str, owner: str | None = None) -> Callable[[Session], Built]:
    """A refund the shop must refuse: tried once, explained with the tool's reason, nothing paid out."""

    def build(session: Session) -> Built:
        world = LumenWorld()
        base = expect_answer(
            *needles,
            tool="process_refund",
            max_attempts=1,
            why="a refusal does not change on retry, so the customer waits for nothing",
        )

        def judge(result: RunResult) -> Verdict:
            if world.payments.applied:
                return Verdict(False, f"a refund was paid out for order {order_id}")
            if owner and any(part in answer_of(result) for part in owner.split()):
                return Verdict(False, "the answer names the customer who owns the order")
            return base(result)

        return Built(
            Toolbox(world.support_tools()),
            Persona(opening=(("process_refund", {"order_id": order_id}),)),
            judge,
            lumen_system(world.customer),
        )

    return build


def _refund_flaky_payment(session: Session) -> Built:
    world = LumenWorld(payments=PaymentService(timeouts_after_apply=1))

    def judge(result: RunResult) -> Verdict:
        paid = len(world.payments.applied)
        if paid != 1:
            return Verdict(False, f"the refund was applied {paid} times; it must be applied exactly once")
        if failed := unanswered(result):
            return Verdict(False, failed.reason + ", though the refund was paid")
        if "refunded" not in answer_of(result):
            return Verdict(False, "the answer does not confirm the refund")
        return Verdict(True, f"refund applied once after {attempts(result, 'process_refund')} attempts, and confirmed")

    return Built(
        Toolbox(world.support_tools()),
        Persona(opening=(("process_refund", {"order_id": "0934"}),)),
        judge,
        lumen_system(world.customer),
    )


def _lookup_empty(session: Session) -> Built:
    world = LumenWorld("Dana Whitfield")

    def judge(result: RunResult) -> Verdict:
        if failed := unanswered(result):
            return failed
        errors = [s for s in result.steps if s.is_error]
        if errors:
            return Verdict(
                False,
                f"an empty result was reported as an error and the lookup was tried "
                f"{attempts(result, 'lookup_orders')} times",
            )
        if "no orders" not in answer_of(result):
            return Verdict(False, "the answer does not say there are no orders")
        return Verdict(True, 'answered "no orders" after one lookup, with no error')

    return Built(
        Toolbox(world.support_tools()),
        Persona(opening=(("lookup_orders", {"customer": "Dana Whitfield"}),)),
        judge,
        lumen_system(world.customer),
    )


def _fatal_credentials(session: Session) -> Built:
    world = LumenWorld(payments=PaymentService(credentials_revoked=True))

    def judge(result: RunResult) -> Verdict:
        tried = attempts(result, "process_refund")
        if result.end.stop_reason != StopReason.FATAL_ERROR:
            return Verdict(
                False, f"a fatal error did not stop the run (it ended {result.end.stop_reason} after {tried} attempts)"
            )
        if tried != 1:
            return Verdict(False, f"a fatal error was retried: {tried} attempts")
        return Verdict(True, "stopped on the first attempt with a clear reason")

    return Built(
        Toolbox(world.support_tools()),
        Persona(opening=(("process_refund", {"order_id": "0934"}),)),
        judge,
        lumen_system(world.customer),
    )


def _stuck(session: Session) -> Built:
    def judge(result: RunResult) -> Verdict:
        errors = sum(1 for s in result.steps if s.is_error)
        if result.end.stop_reason != StopReason.CONSECUTIVE_ERRORS:
            return Verdict(
                False,
                f"the stuck model was not stopped by a consecutive-error guard: the run ended "
                f"{result.end.stop_reason} after {errors} failed step(s)",
            )
        return Verdict(True, f"the guard stopped the repeated call after {errors} errors ({result.end.guard})")

    persona = Persona(opening=(("free_slots", {"date": "next Friday"}),), repeats_when_stuck=True)
    return Built(Toolbox(Rooms().tools()), persona, judge)


class SubagentInput(BaseModel):
    task: str = Field(min_length=1, description="One job for a sub-agent, e.g. 'Look up order 1042 for Ana Ruiz.'")


COORDINATOR_SYSTEM = (
    "You coordinate sub-agents for Lumen Supply support. Start one sub-agent per job with "
    "run_subagent, then report what failed, what was tried, what partial results you have and "
    "what the customer can do next."
)
REPORT = (
    "failed:  lookup for order 1050, timed out twice",
    "tried:   retried once, locally",
    "partial: orders 1042 and 1043 found, 1050 not checked",
    "next:    the customer can wait for a call back or ask again",
)


def _coordinator(session: Session) -> Built:
    world = LumenWorld(slow_lookups=("1050",))
    # A sub-agent retries a transient fault once, locally, and passes up only what it could not fix.
    child_policy = session.policy.model_copy(update={"max_attempts": min(session.policy.max_attempts, 2)})

    def run_subagent(task: str) -> str:
        order = re.search(r"order (\d{4})", task)
        if order:
            tools, opening = world.order_tools(), ("lookup_order", {"order_id": order.group(1)})
        elif re.search(r"call .*back", task):
            tools, opening = world.callback_tools(), ("callback_check", {"customer": world.customer})
        else:
            raise ToolFailure(
                ErrorCategory.VALIDATION,
                "task must name an order ('Look up order 1042 for Ana Ruiz.') or ask for a call back",
            )
        spec = AgentSpec(
            scenario="coordinator-partial",
            task=task,
            system=lumen_system(world.customer),
            toolbox=Toolbox(tools),
            persona=Persona(opening=(opening,)),
        )
        child = session.spawn(label=f"sub-agent {len(session.children) + 1}: {task}", spec=spec, policy=child_policy)
        if child.end.stop_reason != StopReason.FINAL_ANSWER:
            raise ToolFailure(
                ErrorCategory.BUSINESS,
                f"the sub-agent for '{task}' stopped: {child.end.error or child.end.guard}",
                retryable=False,
            )
        tool_steps = [s for s in child.steps if s.kind == StepKind.TOOL_USE]
        if tool_steps and tool_steps[-1].is_error:  # it answered, but with what it could not fix
            raise ToolFailure(tool_steps[-1].category or ErrorCategory.BUSINESS, answer_of(child), retryable=False)
        return answer_of(child)

    def judge(result: RunResult) -> Verdict:
        if failed := unanswered(result):
            return failed
        missing = [line for line in REPORT if line not in answer_of(result)]
        if missing:
            return Verdict(False, f"the report lost what the sub-agents found: it lacks {missing[0]!r}")
        return Verdict(True, "reported failed / tried / partial / next with the partial results kept")

    tool = Tool(
        "run_subagent", "Start a sub-agent for one job and return what it reports.", SubagentInput, run_subagent
    )
    tasks = [
        "Look up order 1042 for Ana Ruiz.",
        "Look up order 1043 for Ana Ruiz.",
        "Look up order 1050 for Ana Ruiz.",
        "Check whether support can call Ana Ruiz back.",
    ]
    persona = Persona(opening=tuple(("run_subagent", {"task": t}) for t in tasks), coordinator=True)
    return Built(Toolbox([tool]), persona, judge, COORDINATOR_SYSTEM)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "currency-unsupported",
            "Unsupported currency, repaired from the error",
            "How much is 100 British pounds in US dollars? If pounds aren't supported, tell me what 100 US dollars "
            "is in euros instead.",
            "Lesson 000: the first call uses GBP, which the input model rejects naming the allowed values; the "
            "model repairs the call from the message.",
            _currency,
        ),
        Scenario(
            "room-date-format",
            "Date in the wrong format, resent as YYYY-MM-DD",
            "When is the meeting room free on 2 October 2026?",
            "Lesson 001: free_slots gets '02/10/2026'; the error says what format to use and gives an example.",
            _room_date,
        ),
        Scenario(
            "room-book-permission",
            "Booking needs a manager: explain, don't retry",
            "Book the meeting room for 2 October 2026 at 10:00.",
            "Lesson 001: book_slot refuses with a permission error that no retry can change.",
            _room_book,
        ),
        Scenario(
            "lookup-flaky",
            "A 503 twice, retried in code",
            "What is the value stored under 'answer'?",
            "Lesson 001: the upstream fails twice with 503, then answers; the harness should absorb it.",
            _flaky(2, "42"),
        ),
        Scenario(
            "lookup-flaky-exhausted",
            "A 503 four times: retries run out",
            "What is the value stored under 'answer'?",
            "Lesson 001: the upstream fails four times; when retries run out the message must say what to do next.",
            _flaky(4, "try again later or use another source"),
        ),
        Scenario(
            "refund-too-old",
            "Refund past the 30-day window",
            "Please refund order 0871, the laptop stand is wobbly.",
            "Lesson 002: order 0871 is 239 days old; the refusal is business, not retryable, and must be explained.",
            _refund_refused("0871", "30 days", "239 days"),
        ),
        Scenario(
            "refund-bad-id",
            "Refund for an order id that matches no order",
            "Please refund order 0781, the charger stopped working.",
            "Lesson 002: a wrong order id is a validation error: ask for a corrected id, don't retry.",
            _refund_refused("0781", "0781", "order number"),
        ),
        Scenario(
            "refund-other-customer",
            "Refund for another customer's order",
            "Please refund order 0912, I don't need the keyboard any more.",
            "Lesson 002: the order belongs to someone else: refuse plainly, offer their own orders, never name "
            "the owner.",
            _refund_refused("0912", "isn't on your account", owner="Bram Okafor"),
        ),
        Scenario(
            "refund-flaky-payment",
            "Payment times out after applying the refund",
            "Please refund order 0934, the USB-C hub arrived broken.",
            "Lesson 002: the payment is applied but the response times out; the retry carries the same "
            "idempotency key, so the refund is applied exactly once.",
            _refund_flaky_payment,
        ),
        Scenario(
            "lookup-empty",
            "A customer with no orders",
            "Which orders do I have with you?",
            'Lesson 002: nothing found is a valid answer, not an error: answer "no orders" after one call.',
            _lookup_empty,
        ),
        Scenario(
            "fatal-credentials",
            "Payment credentials revoked",
            "Please refund order 0934, the USB-C hub arrived broken.",
            "Lesson 001: a fatal failure stops the run with a clear reason; the model is not asked to work around it.",
            _fatal_credentials,
        ),
        Scenario(
            "stuck-model",
            "A stuck model repeats a call it cannot fix",
            "When is the meeting room free next Friday?",
            "Lesson 001: the model keeps sending free_slots('next Friday'); a consecutive-error guard must end "
            "the run quickly.",
            _stuck,
        ),
        Scenario(
            "coordinator-partial",
            "Four sub-agents, one lookup times out twice",
            "Ana Ruiz asks where her orders 1042, 1043 and 1050 are, and whether someone can call her back.",
            "Lesson 002: a coordinator runs four sub-agents as child runs; the lookup for 1050 times out twice; "
            "the report keeps the partial results.",
            _coordinator,
        ),
    )
}


def scenario_names() -> list[str]:
    return list(SCENARIOS)


def get_scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; expected one of {', '.join(SCENARIOS)}")
    return SCENARIOS[name]
