"""Reviews of any run: a verdict override beside the judge's verdict, a note and tags, on the
run page, in the runs list and its filters; the stop queue's filters, identical stops reviewed at once,
the max-steps card's wording; who may review; bad input is a 400 naming the field, with nothing written;
query counts that do not grow with the runs shown."""

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.dom import page
from tests.factories import (
    ExperimentFactory,
    RunFactory,
    StopReviewFactory,
    failed_attempt,
    guard_stop,
    max_steps_stop,
    refund_too_old_starter,
)
from tests.tracer.test_views import HTMX, get, htmx
from tests.tracer.test_views_queries import queries
from tracer import reviews
from tracer.models import BulkReview, MatrixTally, ReviewTag, Run, StopReview
from tracer.reads import stops_page
from tracer.reads.matrix import policy_matrix

pytestmark = pytest.mark.django_db


def review_url(run: Run) -> str:
    return reverse("tracer:run-review", args=[run.pk])


def override(**fields) -> dict:
    """A reviewer's form: the judge said fail, the reviewer says pass, with a reason, a note and tags."""
    return {
        "verdict_override": "pass",
        "override_reason": "the refund was applied once; the judge read an old balance",
        "note": "judge reads the balance before the refund",
        "tags": "flaky-judge, Balance",
        **fields,
    }


# --- any run: its page -------------------------------------------------------------------------


def test_a_reviewer_overrides_a_runs_verdict_and_its_page_shows_both_verdicts(reviewer):
    run = refund_too_old_starter()  # the judge said fail
    response = reviewer.post(review_url(run), override(), headers=HTMX)
    assert response.status_code == 200 and "runReviewed" in response["HX-Trigger"]
    shown = page(response).one(f"#run-review-{run.pk}").text
    assert "judge: fail · reviewer: pass — the refund was applied once; the judge read an old balance" in shown
    run.refresh_from_db()
    review = run.review
    assert run.verdict == "fail" and review.verdict_override == "pass" and review.effective_verdict == "pass"
    assert sorted(review.tags.values_list("name", flat=True)) == ["balance", "flaky-judge"]
    assert review.verdict == "" and review.note == "judge reads the balance before the refund"

    doc = get(reviewer, reverse("tracer:run", args=[run.pk]))
    panel = doc.one(f"#run-review-{run.pk}")
    assert "judge: fail · reviewer: pass" in panel.text and "rita" in panel.text
    assert "judge reads the balance before the refund" in panel.text
    assert ("flaky-judge", "/?tag=flaky-judge") in panel.links
    assert "Why it stopped" not in panel.text  # no stop verdict for a run no guard stopped


def test_a_review_can_be_a_note_and_tags_alone_and_changing_it_replaces_the_tags(reviewer):
    run = RunFactory()
    assert reviewer.post(review_url(run), {"note": "fine", "tags": "a b"}, headers=HTMX).status_code == 200
    assert reviewer.post(review_url(run), {"note": "fine", "tags": "b c"}, headers=HTMX).status_code == 200
    assert sorted(ReviewTag.objects.values_list("name", flat=True)) == ["b", "c"]
    assert StopReview.objects.get(run=run).verdict_override == ""


def test_a_review_of_any_run_is_saved_without_javascript_and_goes_back(reviewer):
    run = RunFactory()
    back = f"/runs/{run.pk}/"
    response = reviewer.post(review_url(run), {"note": "looked fine", "next": back})
    assert response.status_code == 302 and response["Location"] == back
    assert "looked fine" in get(reviewer, back).one(f"#run-review-{run.pk}").text


def test_html_in_a_review_is_shown_as_text(reviewer):
    run = RunFactory()
    reviewer.post(review_url(run), {"note": "<script>alert(1)</script>"}, headers=HTMX)
    response = reviewer.get(reverse("tracer:run", args=[run.pk]))
    assert b"<script>alert(1)" not in response.content
    assert "<script>alert(1)</script>" in page(response).one(f"#run-review-{run.pk}").text


# --- who may review ------------------------------------------------------------------------------


def test_only_a_reviewer_may_review_any_run(plain_user):
    run = RunFactory()
    response = plain_user.post(review_url(run), override(), headers=HTMX)
    assert response.status_code == 403 and "not review runs" in response.content.decode()
    assert not StopReview.objects.exists() and not ReviewTag.objects.exists()
    panel = get(plain_user, reverse("tracer:run", args=[run.pk])).one(f"#run-review-{run.pk}")
    assert not panel.select("form") and "Reviewing runs needs the reviewer role." in panel.text


def test_a_reviewer_sees_the_review_form_on_a_runs_page(reviewer):
    run = RunFactory()
    panel = get(reviewer, reverse("tracer:run", args=[run.pk])).one(f"#run-review-{run.pk}")
    assert panel.texts("button") == ["Save review"]


# --- bad input: a 400 naming the field, nothing written -------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (override(override_reason=""), "Why the judge was wrong: say why the judge was wrong"),
        (override(verdict_override="fail"), "Verdict override: the judge already said fail"),
        (override(verdict_override="maybe"), "Verdict override: Select a valid choice."),
        (override(tags="ok, Not A Tag!"), "Tags: 'Tag!' is not a tag"),
        (override(tags=" ".join(f"t{i}" for i in range(11))), "Tags: at most 10 tags; got 11"),
        (override(verdict="expected"), "Why it stopped: only a run a guard stopped has a stop verdict"),
        ({"override_reason": "because"}, "Why the judge was wrong: a reason goes with a verdict override"),
        ({"note": " "}, "nothing to save"),
        (override(note="x" * 2001), "Note: at most 2000 characters; got 2001"),
    ],
)
def test_a_bad_review_is_a_400_naming_the_field_and_nothing_is_written(reviewer, fields, named):
    run = refund_too_old_starter()
    response = reviewer.post(review_url(run), fields, headers=HTMX)
    assert response.status_code == 400
    errors = " ".join(page(response).texts(".error"))
    assert named in errors, errors
    assert not StopReview.objects.exists() and not ReviewTag.objects.exists()


def test_a_refused_change_leaves_the_earlier_review_and_its_tags_as_they_were(reviewer):
    run = refund_too_old_starter()
    reviewer.post(review_url(run), override(), headers=HTMX)
    response = reviewer.post(review_url(run), override(tags="good, B@D", note="changed"), headers=HTMX)
    assert response.status_code == 400
    review = StopReview.objects.get(run=run)
    assert review.note == "judge reads the balance before the refund"
    assert sorted(review.tags.values_list("name", flat=True)) == ["balance", "flaky-judge"]
    # the form shows what was typed, to correct it
    assert page(response).one("input[name=tags]")["value"] == "good, B@D"


def test_a_run_still_running_cannot_be_reviewed(reviewer):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    response = reviewer.post(review_url(run), {"note": "early"}, headers=HTMX)
    assert response.status_code == 400 and "is still running" in response.content.decode()
    assert not StopReview.objects.exists()


def test_a_bad_review_without_javascript_is_a_400_page_naming_the_field(reviewer):
    run = refund_too_old_starter()
    response = reviewer.post(review_url(run), override(override_reason="", next=f"/runs/{run.pk}/"))
    assert response.status_code == 400
    doc = page(response)
    assert f"Review of run #{run.pk} not saved" in doc.one("h1").text
    assert "Why the judge was wrong: say why the judge was wrong" in " ".join(doc.texts(".error"))
    assert ("Back", f"/runs/{run.pk}/") in doc.links


def test_a_review_of_a_run_that_does_not_exist_is_a_404(reviewer):
    assert reviewer.post(reverse("tracer:run-review", args=[999_999]), {"note": "x"}).status_code == 404


# --- the runs list -----------------------------------------------------------------------------------


def test_the_runs_list_shows_reviews_and_filters_by_reviewed_overridden_and_tag(reviewer):
    overridden = refund_too_old_starter()
    reviews.run_review_save(run=overridden, verdict_override="pass", override_reason="judge wrong", tags="flaky-judge")
    noted = RunFactory()
    reviews.run_review_save(run=noted, note="fine", tags="ok")
    plain = RunFactory()
    url = reverse("tracer:runs")

    def listed(**params) -> set[int]:
        doc = get(reviewer, url, params)
        return {int(row.one("a").text.lstrip("#")) for row in doc.select("#run-rows tr") if row.select("a")}

    assert listed() == {overridden.pk, noted.pk, plain.pk}
    assert listed(reviewed="yes") == {overridden.pk, noted.pk}
    assert listed(reviewed="no") == {plain.pk}
    assert listed(reviewed="overridden") == {overridden.pk}
    assert listed(tag="ok") == {noted.pk}
    assert listed(tag="flaky-judge", reviewed="yes") == {overridden.pk}

    rows = {row.one("a").text: row for row in get(reviewer, url).select("#run-rows tr")}
    verdict = rows[f"#{overridden.pk}"].text
    assert "judge: fail · reviewer: pass" in verdict and "reviewed" in verdict and "flaky-judge" in verdict
    assert "reviewer:" not in rows[f"#{plain.pk}"].text and "reviewed" not in rows[f"#{plain.pk}"].text


def test_an_unknown_tag_in_the_runs_list_filter_is_named(reviewer):
    RunFactory()
    doc = get(reviewer, reverse("tracer:runs"), {"tag": "nope"})
    assert any(e.startswith("Tag: Select a valid choice.") for e in doc.texts(".error"))


def test_the_runs_list_costs_the_same_for_5_and_40_reviewed_runs(reviewer):
    url = reverse("tracer:runs")
    for i in range(5):
        reviews.run_review_save(run=RunFactory(), note=f"n{i}", tags=f"t{i} shared")
    five = queries(reviewer, url)
    for i in range(35):
        reviews.run_review_save(
            run=refund_too_old_starter(), verdict_override="pass", override_reason="r", tags=f"x{i}"
        )
    assert queries(reviewer, url) == five
    assert queries(reviewer, url + "?tag=shared&reviewed=yes") == five


def test_a_reviewed_run_page_costs_the_same_with_1_and_10_tags(reviewer):
    run = RunFactory()
    reviews.run_review_save(run=run, note="n", tags="a")
    url = reverse("tracer:run", args=[run.pk])
    one = queries(reviewer, url)
    reviews.run_review_save(run=run, note="n", tags=" ".join(f"t{i}" for i in range(10)))
    assert queries(reviewer, url) == one


# --- compare and experiment pages -------------------------------------------------------------------


def test_compare_shows_a_reviewers_override_beside_the_judges_verdict(admin_client):
    overridden = refund_too_old_starter()
    other = RunFactory(scenario=overridden.scenario, policy_name="structured")
    reviews.run_review_save(run=overridden, verdict_override="pass", override_reason="the judge was wrong")

    doc = get(admin_client, reverse("tracer:compare") + f"?a={overridden.pk}&b={other.pk}")

    left, right = doc.select(".compare-heads .run-card")
    assert "judge: fail · reviewer: pass" in left.text and "reviewed" in left.text
    assert "pass" in right.text and "reviewer" not in right.text
    [verdicts] = [row for row in doc.select("table.diffs tbody tr") if row.one("th").text.startswith("Verdict")]
    assert verdicts.texts("td") == ["fail (reviewer: pass)", "pass"]


def test_the_compare_picker_names_a_reviewers_override_at_the_cost_of_none(admin_client):
    url = reverse("tracer:compare-suggest") + "?side=a&a=starter"
    overridden = refund_too_old_starter()
    reviews.run_review_save(run=overridden, verdict_override="pass", override_reason="the judge was wrong")
    plain = refund_too_old_starter()

    options = get(admin_client, url)
    assert options.one(f"button[data-run='{overridden.pk}']").text.startswith(
        f"#{overridden.pk} · starter · finished · fail (reviewer: pass) · simulated"
    )
    assert "reviewer" not in options.one(f"button[data-run='{plain.pk}']").text
    one = queries(admin_client, url)
    for _ in range(9):
        reviews.run_review_save(run=refund_too_old_starter(), verdict_override="pass", override_reason="r")
    assert queries(admin_client, url) == one


def test_the_experiment_page_shows_a_reviewers_override_in_its_runs_table(admin_client):
    exp = ExperimentFactory()
    overridden = refund_too_old_starter(experiment=exp)
    plain = refund_too_old_starter(experiment=exp)
    reviews.run_review_save(run=overridden, verdict_override="pass", override_reason="the judge was wrong", tags="x")

    doc = get(admin_client, reverse("tracer:experiment", args=[exp.pk]))

    rows = {row.select("td")[0].text: row.text for row in doc.select("table.runs tbody tr")}
    assert "judge: fail · reviewer: pass" in rows[f"#{overridden.pk}"] and "x" in rows[f"#{overridden.pk}"]
    assert "fail" in rows[f"#{plain.pk}"] and "reviewer" not in rows[f"#{plain.pk}"]


def test_the_experiment_page_costs_the_same_with_1_and_10_reviewed_runs(admin_client):
    exp = ExperimentFactory()
    url = reverse("tracer:experiment", args=[exp.pk])
    reviews.run_review_save(
        run=refund_too_old_starter(experiment=exp), verdict_override="pass", override_reason="r", tags="a"
    )
    one = queries(admin_client, url)
    for i in range(9):
        run = refund_too_old_starter(experiment=exp)
        reviews.run_review_save(run=run, verdict_override="pass", override_reason="r", tags=f"t{i} u{i}")
    assert queries(admin_client, url) == one


# --- the stop queue ------------------------------------------------------------------------------


def test_the_stop_queue_shows_the_failing_call_the_other_policy_and_counts(admin_client):
    stopped = guard_stop(scenario="lookup-stuck")
    other = RunFactory(scenario="lookup-stuck", policy_name="message", final_answer="No such customer.")
    RunFactory()
    doc = get(admin_client, reverse("tracer:stops"))
    case = doc.one(f"#stop-{stopped.pk}")
    assert (f"Run #{stopped.pk}", f"/runs/{stopped.pk}/") in case.links
    calls = case.one(".failing-calls").text
    assert 'lookup_orders({"customer": "c-404"})' in calls
    assert "unknown customer c-404 (try 1)" in calls and "unknown customer c-404 (try 3)" in calls
    assert "The 3 errors in a row that tripped it" in case.text
    beside = case.one(".beside")
    assert f"Run #{other.pk} under message" in beside.text
    assert ("compare", f"/compare/?a={stopped.pk}&b={other.pk}") in beside.links
    assert "Unreviewed 1" in doc.one("#stop-counts").text


def test_a_max_steps_card_does_not_say_errors_tripped_it(admin_client):
    stopped = max_steps_stop()
    case = get(admin_client, reverse("tracer:stops")).one(f"#stop-{stopped.pk}")
    assert "stopped at the 4-step limit" in case.text
    assert "tripped" not in case.text
    assert "It used every step it was allowed; the last 2 failed in a row" in case.text


def test_a_max_steps_run_page_does_not_say_errors_tripped_it(admin_client):
    stopped = max_steps_stop()
    banner = get(admin_client, reverse("tracer:run", args=[stopped.pk])).one(".banner")
    assert "Guard: stopped at the 4-step limit. It used every step it was allowed; the last 2 failed" in banner.text
    assert "tripped" not in banner.text
    consecutive = guard_stop()
    banner = get(admin_client, reverse("tracer:run", args=[consecutive.pk])).one(".banner")
    assert "Guard: 3 tool errors in a row. The errors that tripped it:" in banner.text


@pytest.mark.parametrize("who", ["reviewer", "plain_user"])
def test_html_in_a_stopped_run_and_its_other_policys_run_is_shown_as_text_on_the_queue(who, request):
    script, attr = "<script>alert(1)</script>", '"><b id=pwn>'
    stopped = guard_stop(scenario="lookup-stuck", guard=f"3 errors {attr}", source="import", source_detail=attr)
    stopped.steps.update(
        tool_name=script, attempts=[failed_attempt(1, category="validation", message=f"{script} {attr}").to_dict()]
    )
    RunFactory(scenario="lookup-stuck", policy_name="message", final_answer=f"{script} {attr}")
    response = request.getfixturevalue(who).get(reverse("tracer:stops"))
    html = response.content.decode()
    assert "<script>alert" not in html and "<b id=pwn>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&quot;&gt;&lt;b id=pwn&gt;" in html
    case = page(response).one(f"#stop-{stopped.pk}")
    assert f"guard: 3 errors {attr}" in case.text
    assert case.one(".badge.imported")["title"] == f"imported by file ({attr}): recorded elsewhere, not executed here"
    calls = case.one(".failing-calls").text
    assert f"{script}(" in calls and f"{script} {attr}" in calls
    assert f"{script} {attr}" in case.one(".beside blockquote.answer").text


def test_reviewing_a_stop_saves_why_it_stopped_and_moves_it_to_reviewed(admin_client):
    run = guard_stop()
    response = admin_client.post(
        review_url(run), {"verdict": "unhelpful_error", "note": "the message never says the id format"}, headers=HTMX
    )
    assert "runReviewed" in response["HX-Trigger"] and "stopsReviewed" not in response["HX-Trigger"]
    assert "unhelpful error message" in page(response).one("div.reviewed").text
    review = StopReview.objects.get(run=run)
    assert review.verdict == "unhelpful_error" and review.note == "the message never says the id format"
    assert get(admin_client, reverse("tracer:stops"), {"state": "reviewed"}).select(f"#stop-{run.pk}")
    assert not get(admin_client, reverse("tracer:stops")).select(f"#stop-{run.pk}")


def test_a_note_alone_is_a_review_of_a_stop(admin_client):
    run = guard_stop()
    response = admin_client.post(review_url(run), {"note": "the id format is never said"}, headers=HTMX)
    assert response.status_code == 200
    review = StopReview.objects.get(run=run)
    assert review.verdict == "" and review.note == "the id format is never said"


def test_a_stop_review_with_nothing_in_it_is_a_400_saying_what_to_give(admin_client):
    run = guard_stop()
    response = admin_client.post(review_url(run), {"note": " "}, headers=HTMX)
    assert response.status_code == 400
    assert page(response).texts(".error") == [
        "nothing to save: give why it stopped, a verdict override with its reason, a note or tags"
    ]
    assert not StopReview.objects.exists()


def test_the_stop_counts_refresh_as_a_fragment(admin_client):
    StopReviewFactory(run=guard_stop())
    doc = get(admin_client, reverse("tracer:stops"), headers=htmx("stop-counts"))
    [root] = doc.elements
    assert root["id"] == "stop-counts"
    assert [text for text, _ in doc.links] == ["Unreviewed 0", "Reviewed 1", "All 1"]


def test_the_stop_queue_filters_by_policy_experiment_and_stop_type(admin_client):
    experiment = ExperimentFactory()
    in_experiment = guard_stop(experiment=experiment)
    starter = guard_stop(policy_name="starter")
    limit = max_steps_stop()
    url = reverse("tracer:stops")

    def shown(**params) -> set[int]:
        doc = get(admin_client, url, params)
        return {int(card["id"].removeprefix("stop-")) for card in doc.select("article.stop-case")}

    assert shown() == {in_experiment.pk, starter.pk, limit.pk}
    assert shown(policy="starter") == {starter.pk}
    assert shown(experiment=str(experiment.pk)) == {in_experiment.pk}
    assert shown(stop_reason="max_steps") == {limit.pk}
    assert shown(stop_reason="consecutive_errors", policy="structured") == {in_experiment.pk}
    counts = get(admin_client, url, {"policy": "starter", "state": "all"}).one("#stop-counts")
    assert [text for text, _ in counts.links] == ["Unreviewed 1", "Reviewed 0", "All 1"]
    assert all("policy=starter" in href for _, href in counts.links)  # the tabs keep the filters


@pytest.mark.parametrize(
    ("params", "named"),
    [({"policy": "nope"}, "Policy: "), ({"experiment": "abc"}, "Experiment: "), ({"stop_reason": "x"}, "Stop: ")],
)
def test_a_bad_stop_queue_filter_is_a_400_naming_it(admin_client, params, named):
    guard_stop()
    response = admin_client.get(reverse("tracer:stops"), params)
    assert response.status_code == 400
    assert any(e.startswith(named + "Select a valid choice.") for e in page(response).texts(".error"))


def test_the_stop_queue_has_a_keyboard_hint_and_cards_the_keys_move_between(admin_client):
    guard_stop()
    guard_stop()
    doc = get(admin_client, reverse("tracer:stops"))
    assert "Keys: j next stop · k previous" in doc.one(".key-hint").text
    assert doc.select("[data-keyboard-cards]") and len(doc.select("[data-card][tabindex]")) == 2


# --- identical stops -------------------------------------------------------------------------------


def test_identical_stops_are_counted_on_each_card(admin_client):
    a, b, c = guard_stop(), guard_stop(), guard_stop()
    other_policy = guard_stop(policy_name="starter")
    other_error = guard_stop()
    other_error.steps.filter(index=3).update(tool_name="lookup_customer")
    StopReviewFactory(run=c, verdict="expected")  # reviewed: not counted among the unreviewed
    doc = get(admin_client, reverse("tracer:stops"))
    box = doc.one(f"#stop-{a.pk} label.identical")
    assert "also the 1 identical unreviewed stop (same scenario, policy, stop reason, failing tool and error)" in (
        box.text
    )
    assert doc.one(f"#stop-{b.pk} label.identical")
    assert not doc.select(f"#stop-{other_policy.pk} label.identical")
    assert not doc.select(f"#stop-{other_error.pk} label.identical")


def test_one_review_covers_every_identical_unreviewed_stop_and_no_other(admin_client):
    a, b, c = guard_stop(), guard_stop(), guard_stop()
    other_policy = guard_stop(policy_name="starter")
    other_error = guard_stop()
    other_error.steps.filter(index=3).update(attempts=[{"number": 1, "ok": False, "message": "another error"}])
    earlier = StopReviewFactory(run=c, verdict="expected", note="mine")
    response = admin_client.post(
        review_url(a),
        {"verdict": "unhelpful_error", "note": "no id format", "tags": "ids", "identical": "on"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "stopsReviewed" in response["HX-Trigger"] and "runReviewed" in response["HX-Trigger"]
    assert f"Review of run {a.pk} saved, and of 1 identical stop: #{b.pk}." in page(response).text
    reviewed = {r.run_id: r for r in StopReview.objects.prefetch_related("tags")}
    assert set(reviewed) == {a.pk, b.pk, c.pk}
    assert reviewed[b.pk].verdict == "unhelpful_error" and [t.name for t in reviewed[b.pk].tags.all()] == ["ids"]
    earlier.refresh_from_db()
    assert earlier.verdict == "expected" and earlier.note == "mine"  # an earlier review is left alone
    assert other_policy.pk not in reviewed and other_error.pk not in reviewed

    # the queue's list refreshes itself without them, saying what was saved
    doc = get(admin_client, reverse("tracer:stops"), headers=htmx("stop-cases"))
    [root] = doc.elements
    assert root["id"] == "stop-cases"
    assert {card["id"] for card in doc.select("article.stop-case")} == {
        f"stop-{other_policy.pk}",
        f"stop-{other_error.pk}",
    }


def test_imported_stops_without_attempts_are_identical_by_their_tool_and_what_it_returned():
    a, b, c = (guard_stop(source=Run.Source.IMPORT) for _ in range(3))
    for run in (a, b, c):
        run.steps.update(attempts=[])
    c.steps.filter(index=3).update(result_content={"isError": True, "error": {"message": "something else"}})
    assert stops_page.stops_identical(run=a) == [b]
    assert stops_page.stops_identical(run=c) == []


def test_a_bulk_review_with_a_bad_field_writes_nothing(admin_client):
    a, b = guard_stop(), guard_stop()
    response = admin_client.post(review_url(a), {"verdict": "nope", "identical": "on"}, headers=HTMX)
    assert response.status_code == 400 and not StopReview.objects.exists()
    response = admin_client.post(review_url(RunFactory()), {"note": "n", "identical": "on"}, headers=HTMX)
    assert response.status_code == 400 and "has no identical stops" in response.content.decode()
    assert not StopReview.objects.exists()
    assert b.pk  # still unreviewed


def _reviews_state() -> list[tuple]:
    """Every review as the database holds it, with its tags (what an undo must put back exactly)."""
    return [
        (
            r.run_id,
            r.verdict,
            r.verdict_override,
            r.override_reason,
            r.note,
            r.reviewer_id,
            r.reviewed_at,
            sorted(t.name for t in r.tags.all()),
        )
        for r in StopReview.objects.prefetch_related("tags").order_by("run_id")
    ]


def _bulk_review(client, run, **fields):
    body = {"verdict": "unhelpful_error", "note": "no id format", "tags": "ids", "identical": "on", **fields}
    return client.post(review_url(run), body, headers=HTMX)


def test_a_bulk_review_is_undone_to_exactly_the_reviews_before_it(reviewer):
    a, b, c = guard_stop(), guard_stop(), guard_stop()
    earlier = reviews.run_review_save(run=a, verdict="expected", note="mine", tags="old keep")[0]
    StopReview.objects.filter(pk=earlier.pk).update(reviewed_at=earlier.reviewed_at - timedelta(days=2))
    alone = guard_stop(policy_name="starter")
    reviews.run_review_save(run=alone, verdict="model_stuck")
    before = _reviews_state()
    tallies_before = list(MatrixTally.objects.values().order_by("pk"))
    assert _bulk_review(reviewer, a).status_code == 200
    assert {r.run_id for r in StopReview.objects.filter(verdict="unhelpful_error")} == {a.pk, b.pk, c.pk}

    doc = get(reviewer, reverse("tracer:stops"), headers=htmx("stop-cases"))
    offer = doc.one("form.bulk-undo")
    assert "Reviewed 3 runs as unhelpful error message · a note · tags: ids." in offer.text
    assert "until" in offer.text
    response = reviewer.post(offer["action"], {"next": reverse("tracer:stops")})
    assert response.status_code == 302 and response["Location"] == reverse("tracer:stops")
    assert _reviews_state() == before  # a's own review, with its tags and time; b and c: none again
    assert list(MatrixTally.objects.values().order_by("pk")) == tallies_before

    doc = get(reviewer, reverse("tracer:stops"))
    assert f"Undid the review of 3 runs (#{a.pk}, #{b.pk}, #{c.pk})" in doc.text
    assert not doc.select("form.bulk-undo")  # undone: no more offer
    assert {card["id"] for card in doc.select("article.stop-case")} == {f"stop-{b.pk}", f"stop-{c.pk}"}
    again = reviewer.post(offer["action"])
    assert again.status_code == 400 and "was undone already" in page(again).text


def test_a_bulk_review_cannot_be_undone_after_the_window(reviewer):
    a, b = guard_stop(), guard_stop()
    _bulk_review(reviewer, a)
    bulk = BulkReview.objects.get()
    BulkReview.objects.update(created_at=bulk.created_at - reviews.UNDO_WINDOW - timedelta(seconds=1))
    StopReview.objects.update(reviewed_at=bulk.created_at - reviews.UNDO_WINDOW - timedelta(seconds=2))
    after = _reviews_state()
    assert not get(reviewer, reverse("tracer:stops")).select("form.bulk-undo")  # no longer offered
    response = reviewer.post(reverse("tracer:bulk-review-undo", args=[bulk.pk]))
    assert response.status_code == 400
    text = page(response).text
    assert f"the review of runs #{a.pk}, #{b.pk} can no longer be undone: undo lasts 10 minutes" in text
    assert _reviews_state() == after
    assert BulkReview.objects.get().undone_at is None


def test_undo_refuses_when_a_run_was_reviewed_again_since(reviewer):
    a, b = guard_stop(), guard_stop()
    _bulk_review(reviewer, a)
    reviews.run_review_save(run=b, verdict="model_stuck", note="second look")
    after = _reviews_state()
    response = reviewer.post(reverse("tracer:bulk-review-undo", args=[BulkReview.objects.get().pk]))
    assert response.status_code == 400
    assert f"the review of runs #{b.pk} was changed after this bulk review" in page(response).text
    assert _reviews_state() == after


def test_only_a_reviewer_may_undo_a_bulk_review(client, django_user_model, reviewer):
    a, _ = guard_stop(), guard_stop()
    _bulk_review(reviewer, a)
    state = _reviews_state()
    client.force_login(django_user_model.objects.create_user("paul", password="a-long-test-password"))
    response = client.post(reverse("tracer:bulk-review-undo", args=[BulkReview.objects.get().pk]))
    assert response.status_code == 403 and _reviews_state() == state


def test_a_single_review_offers_no_undo(reviewer):
    reviewer.post(review_url(guard_stop()), {"verdict": "expected"}, headers=HTMX)
    assert not BulkReview.objects.exists()
    assert not get(reviewer, reverse("tracer:stops")).select("form.bulk-undo")


def test_the_stop_queue_costs_the_same_for_4_and_20_identical_and_reviewed_stops(admin_client):
    url = reverse("tracer:stops") + "?state=all"
    for i in range(4):
        stop = guard_stop(scenario=f"s{i % 2}")
        if i % 2:
            reviews.run_review_save(run=stop, verdict="expected", tags="a b")
    RunFactory(scenario="s0", policy_name="starter")  # a run under another policy beside the stops
    four = queries(admin_client, url)
    for i in range(16):
        stop = guard_stop(scenario=f"s{i % 5}", policy_name=("starter", "structured")[i % 2])
        if i % 3 == 0:
            reviews.run_review_save(run=stop, verdict="model_stuck", note="n", tags=f"t{i}")
    assert queries(admin_client, url) == four


def test_the_stop_queue_costs_the_same_with_an_undo_offer_for_2_and_12_runs(reviewer):
    url = reverse("tracer:stops") + "?state=all"
    first = [guard_stop(scenario="two") for _ in range(2)]
    _bulk_review(reviewer, first[0])
    two = queries(reviewer, url)
    more = [guard_stop(scenario="twelve") for _ in range(12)]
    _bulk_review(reviewer, more[0])
    assert get(reviewer, url).one("form.bulk-undo").text.count("Reviewed 12 runs")
    assert queries(reviewer, url) == two


# --- the effective verdict in the data -------------------------------------------------------------


def test_the_matrix_counts_the_reviewers_verdict_and_says_how_many_it_overrode():
    overridden = refund_too_old_starter()
    refund_too_old_starter()
    reviews.run_review_save(run=overridden, verdict_override="pass", override_reason="the judge was wrong")
    [row] = policy_matrix().rows
    [cell] = [c for c in row.cells if c]
    assert (cell.runs, cell.passes, cell.overridden) == (2, 1, 1)
