"""A reviewer at work: overrides the judge on a run no guard stopped and finds it again in the
runs list by its review and its tag; walks the stop queue from the keyboard and reviews identical stops
at once; reads what was wrong when a review is refused."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.factories import guard_stop, refund_too_old_starter, refund_too_old_structured
from tracer.models import StopReview


def test_review_a_run_no_guard_stopped_and_find_it_in_the_list(signed_in: Page, live_server):
    judged_fail = refund_too_old_starter()
    other = refund_too_old_structured()
    page = signed_in

    page.goto(f"{live_server.url}/runs/{judged_fail.pk}/")
    panel = page.locator(f"#run-review-{judged_fail.pk}")
    panel.get_by_label("Verdict").select_option("pass")
    panel.get_by_role("button", name="Save review").click()
    # refused: an override needs its reason; the panel says so and keeps what was typed
    expect(panel.locator(".error")).to_contain_text("Why the judge was wrong: say why the judge was wrong")
    expect(panel.get_by_label("Verdict")).to_have_value("pass")
    assert not StopReview.objects.exists()

    panel.get_by_label("Why the judge was wrong").fill("the answer gives 30 and 239 days; the judge read the draft")
    panel.get_by_label("Note").fill("judge reads an earlier message")
    panel.get_by_label("Tags").fill("flaky-judge")
    panel.get_by_role("button", name="Save review").click()
    expect(panel.locator(".success")).to_contain_text(f"Review of run {judged_fail.pk} saved.")
    expect(panel.locator("div.reviewed")).to_contain_text(
        "judge: fail · reviewer: pass — the answer gives 30 and 239 days; the judge read the draft"
    )
    page.reload()  # stored, not only swapped in
    expect(page.locator(f"#run-review-{judged_fail.pk} div.reviewed")).to_contain_text("judge read the draft")

    page.goto(f"{live_server.url}/")
    rows = page.locator("#run-rows tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#run-rows tr", has_text=f"#{judged_fail.pk}")).to_contain_text("judge: fail · reviewer: pass")
    page.get_by_label("Review").select_option("reviewed")
    expect(page).to_have_url(re.compile(r"[?&]reviewed=yes"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{judged_fail.pk}")
    page.get_by_label("Review").select_option("not reviewed")
    expect(page).to_have_url(re.compile(r"[?&]reviewed=no"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{other.pk}")

    page.goto(f"{live_server.url}/runs/{judged_fail.pk}/")
    page.locator(f"#run-review-{judged_fail.pk}").get_by_role("link", name="flaky-judge").click()
    expect(page).to_have_url(re.compile(r"[?&]tag=flaky-judge"))
    expect(page.get_by_label("Tag")).to_have_value("flaky-judge")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{judged_fail.pk}")


def test_walk_the_stop_queue_by_keyboard_and_review_identical_stops_at_once(signed_in: Page, live_server):
    first, second, third = guard_stop(), guard_stop(), guard_stop()
    different = guard_stop(policy_name="starter")
    page = signed_in
    page.goto(f"{live_server.url}/stops/")
    expect(page.locator(".key-hint")).to_contain_text("j next stop")

    cards = page.locator("article.stop-case")
    expect(cards).to_have_count(4)
    newest = cards.nth(0)  # the newest stop first
    page.keyboard.press("j")
    expect(newest).to_be_focused()
    page.keyboard.press("j")
    expect(cards.nth(1)).to_be_focused()
    page.keyboard.press("k")
    expect(newest).to_be_focused()

    card = page.locator(f"#stop-{third.pk}")
    card.get_by_label("unhelpful error message").check()
    expect(card.locator("label.identical")).to_contain_text(
        "also the 2 identical unreviewed stops (same scenario, policy, stop reason, failing tool and error)"
    )
    card.get_by_label(re.compile("identical unreviewed stops")).check()
    card.get_by_label("Tags").fill("ids")
    card.get_by_role("button", name="Save review").click()

    # the queue refreshes without the three stops the review covered; the one that differs stays
    expect(page.locator("#stop-cases .messages")).to_contain_text(
        f"Review of run {third.pk} saved, and of 2 identical stops"
    )
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_id(f"stop-{different.pk}")
    expect(cards.first).to_be_focused()  # the next stop to review, where j, k and o go on from
    expect(page.locator("#stop-counts")).to_contain_text("Reviewed 3")
    reviewed = {r.run_id: r.verdict for r in StopReview.objects.all()}
    assert reviewed == {first.pk: "unhelpful_error", second.pk: "unhelpful_error", third.pk: "unhelpful_error"}

    page.get_by_label("Policy").select_option("starter")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"[?&]policy=starter"))
    expect(cards).to_have_count(1)
    page.keyboard.press("j")
    page.keyboard.press("o")
    expect(page).to_have_url(re.compile(rf"/runs/{different.pk}/$"))


def test_saving_a_review_on_a_stop_card_moves_to_the_next_card(signed_in: Page, live_server):
    oldest, middle, newest = guard_stop(), guard_stop(policy_name="starter"), guard_stop(policy_name="message")
    page = signed_in
    page.goto(f"{live_server.url}/stops/")
    cards = page.locator("article.stop-case")
    expect(cards).to_have_count(3)

    page.keyboard.press("j")
    expect(cards.nth(0)).to_have_id(f"stop-{newest.pk}")
    expect(cards.nth(0)).to_be_focused()
    cards.nth(0).get_by_label("model stuck").check()
    cards.nth(0).get_by_role("button", name="Save review").press("Enter")

    expect(cards.nth(0).locator(".success")).to_contain_text(f"Review of run {newest.pk} saved.")
    expect(page.locator(f"#stop-{middle.pk}")).to_be_focused()
    page.keyboard.press("j")  # the keys go on from the card it moved to
    expect(page.locator(f"#stop-{oldest.pk}")).to_be_focused()
    assert StopReview.objects.get().run_id == newest.pk


def test_a_refused_stop_review_names_the_field_before_save_and_keeps_the_identical_box(signed_in: Page, live_server):
    stop, alike = guard_stop(), guard_stop()
    page = signed_in
    page.goto(f"{live_server.url}/stops/")
    card = page.locator(f"#stop-{stop.pk}")
    card.get_by_label(re.compile("identical unreviewed stop")).check()
    card.get_by_label("Tags").fill("Not A Tag!")
    card.get_by_role("button", name="Save review").click()

    error = card.locator(".error")
    expect(error).to_contain_text("Tags: 'Tag!' is not a tag")
    save = card.get_by_role("button", name="Save review")
    assert error.first.bounding_box()["y"] < save.bounding_box()["y"]  # beside its field, above Save
    box = card.get_by_label(re.compile("identical unreviewed stop"))
    expect(box).to_be_checked()  # still offered, still ticked
    assert not StopReview.objects.exists()

    card.get_by_label("Tags").fill("")
    card.get_by_label("Note").fill("the id format is never said")  # a note alone is a review
    save.click()
    expect(page.locator("#stop-cases .messages")).to_contain_text(f"Review of run {stop.pk} saved, and of 1")
    assert {r.run_id: r.note for r in StopReview.objects.all()} == {
        stop.pk: "the id format is never said",
        alike.pk: "the id format is never said",
    }


def test_undo_a_review_of_identical_stops_puts_them_back_in_the_queue(signed_in: Page, live_server):
    third = [guard_stop() for _ in range(3)][-1]
    page = signed_in
    page.goto(f"{live_server.url}/stops/")
    cards = page.locator("article.stop-case")
    expect(cards).to_have_count(3)
    card = page.locator(f"#stop-{third.pk}")
    card.get_by_label("model stuck").check()
    card.get_by_label(re.compile("identical unreviewed stops")).check()
    card.get_by_role("button", name="Save review").click()
    expect(cards).to_have_count(0)

    offer = page.locator("form.bulk-undo")
    expect(offer).to_contain_text("Reviewed 3 runs as model stuck.")
    expect(offer).to_contain_text("until")
    offer.get_by_role("button", name="Undo").click()

    expect(page.locator(".messages")).to_contain_text(f"Undid the review of 3 runs (#{third.pk}, ")
    expect(cards).to_have_count(3)
    expect(page.locator("#stop-counts")).to_contain_text("Unreviewed 3")
    expect(page.locator("form.bulk-undo")).to_have_count(0)
    assert not StopReview.objects.exists()
