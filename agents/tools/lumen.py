"""Lumen Supply (lesson 002): orders, refunds through a payment service, and the faults it can show.

Refunds are keyed by an idempotency key, so a refund retried after a lost response is applied once.
Messages are written for the customer to read and never name another customer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from ..errors import ToolFailure, fail
from ..vocabulary import ErrorCategory
from . import Tool

REFUND_WINDOW_DAYS = 30
ORDER_ID = Field(pattern=r"^\d{4}$", description="The four-digit order id, e.g. 0871")


@dataclass
class Order:
    order_id: str
    owner: str
    item: str
    age_days: int
    amount: str
    status: str = "delivered"


@dataclass
class Refund:
    refund_id: str
    order_id: str
    amount: str
    idempotency_key: str


@dataclass
class PaymentService:
    """Applies refunds once per idempotency key. Faults are injected by count."""

    timeouts_before_apply: int = 0  # the request times out and nothing is applied
    timeouts_after_apply: int = 0  # the refund is applied, then the response is lost
    credentials_revoked: bool = False
    refunds: dict[str, Refund] = field(default_factory=dict)
    applied: list[Refund] = field(default_factory=list)  # the ledger: one entry per money movement

    def refund(self, key: str, order: Order) -> Refund:
        if self.credentials_revoked:
            raise ToolFailure(
                ErrorCategory.FATAL,
                "The payment service rejected our credentials: they were revoked. "
                "An operator has to renew them before any refund can run.",
            )
        if key in self.refunds:
            return self.refunds[key]
        if self.timeouts_before_apply:
            self.timeouts_before_apply -= 1
            raise ToolFailure(ErrorCategory.TRANSIENT, "the payment service timed out")
        refund = Refund(f"rf-{order.order_id}-{len(self.applied) + 1}", order.order_id, order.amount, key)
        self.refunds[key] = refund
        self.applied.append(refund)
        if self.timeouts_after_apply:
            self.timeouts_after_apply -= 1
            raise ToolFailure(ErrorCategory.TRANSIENT, "the payment service timed out")
        return refund


class OrderInput(BaseModel):
    order_id: str = ORDER_ID


class CustomerInput(BaseModel):
    customer: str = Field(min_length=1, description="The customer's full name")


def default_orders() -> list[Order]:
    return [
        Order("0871", "Ana Ruiz", "laptop stand", 239, "34.00"),
        Order("0934", "Ana Ruiz", "USB-C hub", 9, "29.00"),
        Order("0912", "Bram Okafor", "mechanical keyboard", 12, "89.00"),
        Order("1042", "Ana Ruiz", "monitor arm", 6, "59.00", "shipped"),
        Order("1043", "Ana Ruiz", "webcam", 5, "45.00", "in transit"),
        Order("1050", "Ana Ruiz", "desk lamp", 3, "25.00", "processing"),
    ]


class LumenWorld:
    """The shop as one customer's support session sees it."""

    def __init__(
        self,
        customer: str = "Ana Ruiz",
        *,
        payments: PaymentService | None = None,
        slow_lookups: tuple[str, ...] = (),
        orders: list[Order] | None = None,
        history_fault: str = "",
        others_look_missing: bool = False,
    ) -> None:
        self.customer = customer
        # "timeout": the order history always times out; "access": this session may not read it.
        self.history_fault = history_fault
        # Another customer's order is refused with a misleading "not found" (lesson 001), as permission.
        self.others_look_missing = others_look_missing
        self.orders = {o.order_id: o for o in (default_orders() if orders is None else orders)}
        self.payments = payments or PaymentService()
        self.slow_lookups = set(slow_lookups)  # order ids whose lookup always times out
        self.lookup_calls: list[str] = []
        self.refund_requests: list[str] = []  # every refund the shop was asked for, by order id

    def _order_for_customer(self, order_id: str) -> Order:
        order = self.orders.get(order_id)
        if order is None:
            raise ToolFailure(
                ErrorCategory.VALIDATION,
                f"No order {order_id} was found. Check the four-digit order number on the receipt and send it again.",
            )
        if order.owner != self.customer and self.others_look_missing:
            mine = ", ".join(o.order_id for o in self.orders.values() if o.owner == self.customer)
            raise ToolFailure(ErrorCategory.PERMISSION, f"Order '{order_id}' was not found; valid order ids: {mine}")
        if order.owner != self.customer:
            raise ToolFailure(
                ErrorCategory.PERMISSION, f"Order {order_id} isn't on your account, so it can't be refunded here."
            )
        return order

    def process_refund(self, order_id: str) -> dict:
        self.refund_requests.append(order_id)
        order = self._order_for_customer(order_id)
        if order.age_days > REFUND_WINDOW_DAYS:
            raise ToolFailure(
                ErrorCategory.BUSINESS,
                f"Refunds close after {REFUND_WINDOW_DAYS} days. This order is {order.age_days} days old.",
            )
        refund = self.payments.refund(f"refund:{self.customer}:{order_id}", order)
        return {"order_id": order_id, "refund_id": refund.refund_id, "amount": refund.amount, "status": "refunded"}

    def lookup_orders(self, customer: str) -> dict:
        if customer != self.customer:
            raise ToolFailure(ErrorCategory.PERMISSION, "You can only look up the orders on your own account.")
        if self.history_fault == "timeout":
            raise ToolFailure(ErrorCategory.TRANSIENT, "the order history service timed out")
        if self.history_fault == "access":
            raise ToolFailure(
                ErrorCategory.PERMISSION,
                "This support session has no access to the order history; ask an operator to restore access",
            )
        mine = [o for o in self.orders.values() if o.owner == customer]
        if not mine:
            return fail("empty", f"No orders found for {customer}.")
        return {
            "orders": [
                {"order_id": o.order_id, "item": o.item, "age_days": o.age_days, "status": o.status} for o in mine
            ]
        }

    def lookup_order(self, order_id: str) -> dict:
        self.lookup_calls.append(order_id)
        if order_id in self.slow_lookups:
            raise ToolFailure(ErrorCategory.TRANSIENT, f"lookup for order {order_id} timed out")
        order = self._order_for_customer(order_id)
        return {"order_id": order.order_id, "item": order.item, "status": order.status}

    def callback_check(self, customer: str) -> dict:
        return {"customer": customer, "call_back": "available today"}

    def support_tools(self) -> list[Tool]:
        return [
            Tool("lookup_orders", "List the customer's orders.", CustomerInput, self.lookup_orders),
            Tool(
                "process_refund",
                "Refund an order in full to the original payment method.",
                OrderInput,
                self.process_refund,
            ),
        ]

    def order_tools(self) -> list[Tool]:
        return [Tool("lookup_order", "Look up one order's status.", OrderInput, self.lookup_order)]

    def callback_tools(self) -> list[Tool]:
        return [
            Tool(
                "callback_check",
                "Check whether support can call the customer back.",
                CustomerInput,
                self.callback_check,
            )
        ]
