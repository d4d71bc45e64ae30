"""The lessons' tools and worlds, called directly."""

import pytest

from agents.errors import ToolFailure
from agents.tools.lookup import FlakyUpstream
from agents.tools.lumen import LumenWorld, PaymentService
from agents.tools.rooms import Rooms


def test_free_slots_lists_one_hour_slots_without_the_taken_ones():
    assert Rooms().free_slots("2026-10-02") == {
        "date": "2026-10-02",
        "free": ["10:00", "11:00", "12:00", "13:00", "15:00", "16:00"],
    }


def test_free_slots_says_what_format_to_resend_the_date_in():
    with pytest.raises(ToolFailure) as caught:
        Rooms().free_slots("02/10/2026")
    assert caught.value.category == "validation"
    assert caught.value.message == (
        "date '02/10/2026' is not in YYYY-MM-DD format; resend it in that format, e.g. '2026-10-02'"
    )


def test_book_slot_refuses_with_a_permission_error_that_no_retry_changes():
    with pytest.raises(ToolFailure) as caught:
        Rooms().book_slot("2026-10-02", "10:00")
    assert (caught.value.category, caught.value.retryable) == ("permission", False)
    assert "manager approval" in caught.value.message


def test_the_flaky_lookup_fails_a_set_number_of_times_then_answers():
    upstream = FlakyUpstream(failures=2)
    for _ in range(2):
        with pytest.raises(ToolFailure, match="upstream returned 503"):
            upstream.lookup("answer")
    assert upstream.lookup("answer") == {"key": "answer", "value": 42}


def test_a_refund_past_the_window_is_a_business_refusal_naming_the_age():
    with pytest.raises(ToolFailure) as caught:
        LumenWorld().process_refund("0871")
    assert caught.value.category == "business"
    assert caught.value.message == "Refunds close after 30 days. This order is 239 days old."


def test_another_customers_order_is_refused_without_naming_the_owner():
    with pytest.raises(ToolFailure) as caught:
        LumenWorld().process_refund("0912")
    assert caught.value.category == "permission"
    assert "Bram" not in caught.value.message and "Okafor" not in caught.value.message


def test_an_unknown_order_id_is_a_validation_error_saying_what_to_send():
    with pytest.raises(ToolFailure) as caught:
        LumenWorld().process_refund("0781")
    assert caught.value.category == "validation" and "four-digit order number" in caught.value.message


def test_a_refund_retried_after_a_lost_response_is_applied_exactly_once():
    world = LumenWorld(payments=PaymentService(timeouts_after_apply=1))
    with pytest.raises(ToolFailure, match="timed out"):
        world.process_refund("0934")
    assert len(world.payments.applied) == 1  # the money moved, the response was lost
    first_retry = world.process_refund("0934")
    assert first_retry["refund_id"] == "rf-0934-1"
    assert len(world.payments.applied) == 1


def test_a_timeout_before_the_payment_applies_nothing():
    world = LumenWorld(payments=PaymentService(timeouts_before_apply=1))
    with pytest.raises(ToolFailure):
        world.process_refund("0934")
    assert world.payments.applied == []
    assert world.process_refund("0934")["status"] == "refunded"


def test_revoked_credentials_are_fatal():
    with pytest.raises(ToolFailure) as caught:
        LumenWorld(payments=PaymentService(credentials_revoked=True)).process_refund("0934")
    assert caught.value.category == "fatal"


def test_a_customer_with_no_orders_gets_an_empty_list_not_an_error():
    assert LumenWorld("Dana Whitfield").lookup_orders("Dana Whitfield") == {
        "orders": [],
        "message": "No orders found for Dana Whitfield.",
    }


def test_a_customer_cannot_list_someone_elses_orders():
    with pytest.raises(ToolFailure) as caught:
        LumenWorld().lookup_orders("Bram Okafor")
    assert caught.value.category == "permission"
