"""Dashboard pages: login, fragments for htmx, escaping of trace data, forms that name the bad field."""

import pytest
from django.urls import reverse

from tests.factories import (
    ExperimentFactory,
    RunFactory,
    StepFactory,
    StopReviewFactory,
    attempt,
    guard_stop,
    refund_too_old_starter,
    refund_too_old_structured,
)
from tracer.models import PolicyVariant, Run, StopReview

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
SCRIPT = "<script>alert('x')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def htmx(target: str) -> dict:
    return {**HTMX, "HX-Target": target}


@pytest.mark.parametrize(
    "name,args",
    [("tracer:runs", []), ("tracer:compare", []), ("tracer:policies", []), ("tracer:stops", []), ("tracer:launch", [])],
)
def test_every_page_sends_a_visitor_to_the_login_page(client, name, args):
    response = client.get(reverse(name, args=args))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_run_page_requires_login_too(client):
    run = RunFactory()
    for url in (reverse("tracer:run", args=[run.pk]), reverse("tracer:run-steps", args=[run.pk])):
        assert client.get(url)["Location"].startswith(reverse("login"))


def test_the_login_page_renders(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="username"' in response.content


# --- runs list -------------------------------------------------------------------------------


def test_the_run_list_shows_a_simulated_run_labelled_simulated(admin_client):
    run = refund_too_old_starter()
    html = admin_client.get(reverse("tracer:runs")).content.decode()
    assert f'href="/runs/{run.pk}/"' in html
    assert ">simulated<" in html
    assert "refund-too-old" in html
    assert "(2 wasted)" in html


def test_the_run_list_filters_by_policy_and_searches_answers_and_inputs(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    RunFactory(scenario="lookup-empty", search_text='lookup_orders {"customer": "zed-42"}')

    html = admin_client.get(reverse("tracer:runs"), {"policy": "starter"}).content.decode()
    assert f"/runs/{starter.pk}/" in html and f"/runs/{structured.pk}/" not in html

    html = admin_client.get(reverse("tracer:runs"), {"q": "30 days after purchase"}).content.decode()
    assert f"/runs/{structured.pk}/" in html and f"/runs/{starter.pk}/" not in html

    html = admin_client.get(reverse("tracer:runs"), {"q": "zed-42"}).content.decode()
    assert "lookup-empty" in html and f"/runs/{starter.pk}/" not in html


def test_the_run_list_names_a_bad_filter_and_ignores_it(admin_client):
    RunFactory()
    response = admin_client.get(reverse("tracer:runs"), {"status": "exploded"})
    assert response.status_code == 200
    assert "Status: Select a valid choice. exploded is not one of the available choices." in response.content.decode()


def test_the_run_list_polls_only_while_a_shown_run_is_active(admin_client):
    RunFactory()
    assert 'hx-trigger="every 1s"' not in admin_client.get(reverse("tracer:runs")).content.decode()
    RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    assert 'hx-trigger="every 1s"' in admin_client.get(reverse("tracer:runs")).content.decode()


def test_htmx_polling_the_run_list_gets_only_the_rows(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    html = admin_client.get(reverse("tracer:runs"), headers=htmx("run-rows")).content.decode()
    assert html.lstrip().startswith('<tbody id="run-rows"')
    assert "<html" not in html and "<nav" not in html
    assert f"/runs/{run.pk}/" in html


def test_htmx_filtering_the_run_list_gets_only_the_table(admin_client):
    RunFactory()
    response = admin_client.get(reverse("tracer:runs"), {"policy": "structured"}, headers=htmx("run-table"))
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="run-table"')
    assert "<html" not in html


def test_the_run_list_paginates(admin_client):
    for _ in range(51):
        RunFactory()
    html = admin_client.get(reverse("tracer:runs")).content.decode()
    assert "page 1 of 2" in html
    assert "?page=2" in html


# --- run page --------------------------------------------------------------------------------


def test_the_run_page_shows_every_attempt_the_banner_and_the_transcript_toggle(admin_client):
    run = refund_too_old_starter(transcript=[{"role": "user", "content": "Please refund order 0871"}])
    html = admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode()
    assert html.count('class="attempt fail"') == 3
    assert "is_error" in html
    assert "not retryable" in html
    assert "Stopped: final_answer" in html or "Stopped: Final Answer" in html
    assert "generic error" in html
    assert '<details id="run-transcript" class="transcript"' in html and "Please refund order 0871" in html
    assert ">simulated<" in html


def test_the_run_page_shows_each_attempt_as_the_starter_harness_saw_it(admin_client):
    run = refund_too_old_starter()
    html = admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode()
    assert html.count('<span class="badge outcome">bare &quot;Error&quot;</span>') == 3
    assert "tool knew:" in html


def test_the_run_page_links_other_policies_with_compare(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    html = admin_client.get(reverse("tracer:run", args=[starter.pk])).content.decode()
    assert f"/compare/?a={starter.pk}&amp;b={structured.pk}" in html


def test_the_run_page_lists_child_runs_and_the_child_links_its_parent(admin_client):
    parent = RunFactory(scenario="coordinator-partial")
    child = RunFactory(scenario="coordinator-partial", parent=parent, label="lookup order 1050")
    html = admin_client.get(reverse("tracer:run", args=[parent.pk])).content.decode()
    assert f"/runs/{child.pk}/" in html and "lookup order 1050" in html
    html = admin_client.get(reverse("tracer:run", args=[child.pk])).content.decode()
    assert f"parent run #{parent.pk}" in html


def test_a_guard_stop_banner_names_the_guard_and_the_errors_that_tripped_it(admin_client):
    run = guard_stop()
    html = admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode()
    assert "Guard: <strong>3 tool errors in a row</strong>" in html
    assert html.count('href="#step-') == 3
    assert "unknown customer c-404 (try 3)" in html


def test_a_running_run_polls_for_new_steps_and_a_finished_one_does_not(admin_client):
    running = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    StepFactory(run=running, index=1)
    html = admin_client.get(reverse("tracer:run", args=[running.pk])).content.decode()
    assert f'hx-get="/runs/{running.pk}/steps/?after=1" hx-trigger="every 1s"' in html

    finished = refund_too_old_structured()
    assert 'hx-trigger="every 1s"' not in admin_client.get(reverse("tracer:run", args=[finished.pk])).content.decode()


def test_the_step_poll_returns_only_new_steps_and_the_status(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    StepFactory(run=run, index=1, tool_name="lookup_orders")
    StepFactory(run=run, index=2, tool_name="process_refund")
    html = admin_client.get(reverse("tracer:run-steps", args=[run.pk]), {"after": 1}, headers=HTMX).content.decode()
    assert 'id="step-2"' in html and 'id="step-1"' not in html
    assert f'hx-get="/runs/{run.pk}/steps/?after=2"' in html
    assert 'id="run-status" class="run-status" hx-swap-oob="true"' in html
    assert "<html" not in html


def test_the_step_poll_stops_once_the_run_has_finished(admin_client):
    run = refund_too_old_structured()
    html = admin_client.get(reverse("tracer:run-steps", args=[run.pk]), {"after": 2}, headers=HTMX).content.decode()
    assert "hx-trigger" not in html.replace("policyCreated", "")
    assert "Stopped:" in html
    assert '<details id="run-transcript" class="transcript" hx-swap-oob="true">' in html
    assert 'id="step-' not in html


def test_the_step_poll_without_htmx_goes_to_the_run_page(admin_client):
    run = RunFactory()
    response = admin_client.get(reverse("tracer:run-steps", args=[run.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("tracer:run", args=[run.pk])


# --- escaping --------------------------------------------------------------------------------


def test_html_in_tool_inputs_outputs_and_answers_is_shown_as_text(admin_client):
    run = RunFactory(
        final_answer=f"answer {SCRIPT}",
        task=f"task {SCRIPT}",
        scenario="refund-too-old",
        transcript=[{"role": "assistant", "content": SCRIPT}],
        error=SCRIPT,
        verdict_reason=SCRIPT,
        label=SCRIPT,
    )
    StepFactory(
        run=run,
        index=1,
        input={"order_id": SCRIPT},
        attempts=[attempt(1, message=SCRIPT), attempt(2, ok=True, content={"html": SCRIPT})],
        result_content={"error": SCRIPT},
        text=SCRIPT,
    )
    StepFactory(run=run, index=2, kind="final_answer", tool_name="", input=None, attempts=[], text=SCRIPT)
    other = RunFactory(policy_name="starter", final_answer=SCRIPT)
    StepFactory(run=other, index=1, input={"order_id": SCRIPT}, attempts=[attempt(1, message=SCRIPT)])

    pages = [
        reverse("tracer:run", args=[run.pk]),
        reverse("tracer:runs"),
        f"{reverse('tracer:compare')}?a={run.pk}&b={other.pk}",
    ]
    for url in pages:
        html = admin_client.get(url).content.decode()
        assert SCRIPT not in html, url
        assert ESCAPED in html or "&lt;script&gt;" in html, url


def test_html_in_a_guard_stops_error_text_is_shown_as_text(admin_client):
    run = guard_stop()
    run.steps.update(input={"customer": SCRIPT})
    run.steps.filter(index=3).update(attempts=[attempt(1, category="validation", message=SCRIPT)])
    html = admin_client.get(reverse("tracer:stops")).content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;" in html


# --- compare ---------------------------------------------------------------------------------


def test_compare_highlights_the_split_where_starter_retried_and_structured_answered(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert html.count("This is where the runs split") == 1
    split_at = html.index('class="line attempt-line is-split"')
    split_line = html[split_at : html.index('<div class="line', split_at + 1)]
    assert "Retry · attempt 2" in split_line
    assert "no retry: the result went back to the model" in split_line
    assert "Cause: this outcome differed — bare &quot;Error&quot; against business · not retryable" in html
    assert "different scenarios" not in html


def test_compare_summarises_the_differences(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    for label in (
        "Tool calls",
        "Errors",
        "Retries",
        "Retries spent on non-retryable errors",
        "Tokens",
        "Stop reason",
        "Verdict",
        "Final answer",
    ):
        assert f"<th>{label}</th>" in html
    assert html.count('<tr class="differs">') == 5  # retries, wasted, tokens, verdict, final answer


def test_compare_accepts_the_two_ticked_runs_of_the_list(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    html = admin_client.get(f"{reverse('tracer:compare')}?run={b.pk}&run={a.pk}").content.decode()
    assert "This is where the runs split" in html
    assert html.index(f"#{a.pk}</a>") < html.index(f"#{b.pk}</a>")  # the older run is A


def test_compare_warns_when_the_scenarios_differ(admin_client):
    a = refund_too_old_starter()
    b = RunFactory(scenario="lookup-empty")
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert "These runs are of different scenarios (refund-too-old and lookup-empty)" in html


def test_compare_names_the_missing_run_field(admin_client):
    html = admin_client.get(reverse("tracer:compare"), {"a": "7"}).content.decode()
    assert "Run B: This field is required." in html
    a = RunFactory()
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": a.pk}).content.decode()
    assert "Run B: pick a different run from run A" in html


def test_compare_of_an_unknown_run_is_not_found(admin_client):
    a = RunFactory()
    assert admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": 99999}).status_code == 404


# --- policies --------------------------------------------------------------------------------


def test_the_policy_matrix_aggregates_each_cell_and_links_to_its_runs(admin_client):
    refund_too_old_starter()
    refund_too_old_starter(verdict=Run.Verdict.PASS)
    refund_too_old_structured()
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED, verdict=Run.Verdict.FAIL)
    html = admin_client.get(reverse("tracer:policies")).content.decode()
    assert "/?scenario=refund-too-old&amp;policy=starter" in html
    assert "50%" in html and "100%" in html
    assert "1 crash" in html
    assert '<svg class="bar pass"' in html


def test_the_policy_matrix_shows_only_the_chosen_columns(admin_client):
    refund_too_old_starter()
    refund_too_old_structured()
    html = admin_client.get(
        reverse("tracer:policies"), {"policy": "structured"}, headers=htmx("policy-matrix")
    ).content.decode()
    assert html.lstrip().startswith('<section id="policy-matrix"')
    assert "<th>structured</th>" in html and "<th>starter</th>" not in html


def test_creating_a_policy_variant_triggers_an_event_and_returns_a_fresh_form(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"),
        {"name": "structured-patient", "base": "structured", "max_attempts": "5", "retry_on": "transient"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "policyCreated" in response["HX-Trigger"]
    assert "Policy <strong>structured-patient</strong> created." in response.content.decode()
    variant = PolicyVariant.objects.get(name="structured-patient")
    assert variant.settings["max_attempts"] == 5 and variant.settings["error_format"] == "structured"
    assert not variant.is_preset


def test_a_policy_variant_form_names_each_invalid_field(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"),
        {"name": "Bad Name!", "base": "starter", "max_attempts": "99", "backoff_jitter": "3"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert 'id="error-name"' in html and "use lowercase letters, digits, - and _" in html
    assert 'id="error-max_attempts"' in html and "less than or equal to 10" in html
    assert 'id="error-backoff_jitter"' in html and "less than or equal to 1" in html
    assert "HX-Trigger" not in response
    assert not PolicyVariant.objects.filter(is_preset=False).exists()


def test_a_policy_variant_name_must_be_new(admin_client):
    response = admin_client.post(reverse("tracer:policy-create"), {"name": "starter", "base": "starter"})
    assert "a policy named &#x27;starter&#x27; already exists" in response.content.decode()


def test_a_policy_variant_created_without_javascript_redirects_to_the_page(admin_client):
    response = admin_client.post(reverse("tracer:policy-create"), {"name": "quiet", "base": "message"})
    assert response.status_code == 302 and response["Location"] == reverse("tracer:policies")
    assert "quiet" in admin_client.get(reverse("tracer:policies")).content.decode()


def test_the_policy_list_refreshes_itself_as_a_fragment(admin_client):
    html = admin_client.get(reverse("tracer:policies"), headers=htmx("policy-list")).content.decode()
    assert html.lstrip().startswith('<section id="policy-list"')
    assert 'hx-trigger="policyCreated from:body"' in html


# --- stops -----------------------------------------------------------------------------------


def test_the_stop_queue_shows_the_failing_call_the_other_policy_and_counts(admin_client):
    stopped = guard_stop(scenario="lookup-stuck")
    other = RunFactory(scenario="lookup-stuck", policy_name="message", final_answer="No such customer.")
    RunFactory()
    html = admin_client.get(reverse("tracer:stops")).content.decode()
    assert f"Run #{stopped.pk}" in html
    assert "lookup_orders({&quot;customer&quot;: &quot;c-404&quot;})" in html
    assert "unknown customer c-404 (try 1)" in html and "unknown customer c-404 (try 3)" in html
    assert f"Run #{other.pk}</a> under <strong>message</strong>" in html
    assert f"/compare/?a={stopped.pk}&amp;b={other.pk}" in html
    assert 'Unreviewed <span class="count">1</span>' in html


def test_reviewing_a_stop_saves_the_verdict_and_moves_it_to_reviewed(admin_client):
    run = guard_stop()
    response = admin_client.post(
        reverse("tracer:stop-review", args=[run.pk]),
        {"verdict": "unhelpful_error", "note": "the message never says the id format"},
        headers=HTMX,
    )
    assert "stopReviewed" in response["HX-Trigger"]
    assert "unhelpful error message" in response.content.decode()
    review = StopReview.objects.get(run=run)
    assert review.verdict == "unhelpful_error" and review.note == "the message never says the id format"
    html = admin_client.get(reverse("tracer:stops"), {"state": "reviewed"}).content.decode()
    assert f"Run #{run.pk}" in html
    assert f"Run #{run.pk}" not in admin_client.get(reverse("tracer:stops")).content.decode()


def test_a_review_without_a_verdict_names_the_field(admin_client):
    run = guard_stop()
    html = admin_client.post(reverse("tracer:stop-review", args=[run.pk]), {"note": "x"}, headers=HTMX).content.decode()
    assert "Verdict: This field is required." in html
    assert not StopReview.objects.exists()


def test_a_review_without_javascript_redirects_back(admin_client):
    run = guard_stop()
    response = admin_client.post(
        reverse("tracer:stop-review", args=[run.pk]), {"verdict": "expected", "next": "/stops/?state=all"}
    )
    assert response.status_code == 302 and response["Location"] == "/stops/?state=all"
    assert StopReview.objects.get(run=run).verdict == "expected"


def test_a_review_never_redirects_off_site(admin_client):
    run = guard_stop()
    response = admin_client.post(
        reverse("tracer:stop-review", args=[run.pk]), {"verdict": "expected", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("tracer:stops")


def test_the_stop_counts_refresh_as_a_fragment(admin_client):
    StopReviewFactory(run=guard_stop())
    html = admin_client.get(reverse("tracer:stops"), headers=htmx("stop-counts")).content.decode()
    assert html.lstrip().startswith('<nav id="stop-counts"')
    assert 'Reviewed <span class="count">1</span>' in html


# --- launch ----------------------------------------------------------------------------------


def test_the_launch_form_names_each_missing_choice(admin_client):
    html = admin_client.post(reverse("tracer:launch"), {"model_backend": "simulated", "repeats": "0"}).content.decode()
    assert html.count("This field is required.") == 2  # scenarios, policies
    assert "Repeats: Ensure this value is greater than or equal to 1." in html


def test_the_experiment_page_polls_until_done_then_links_matrix_and_pairs(admin_client):
    exp = ExperimentFactory(total_runs=2, finished_runs=1)
    a = refund_too_old_starter(experiment=exp)
    b = refund_too_old_structured(experiment=exp, status=Run.Status.RUNNING)
    html = admin_client.get(reverse("tracer:experiment", args=[exp.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in html and "Open its matrix" not in html

    exp.finished_runs = 2
    exp.save()
    Run.objects.filter(pk=b.pk).update(status=Run.Status.FINISHED)
    html = admin_client.get(reverse("tracer:experiment", args=[exp.pk]), headers=HTMX).content.decode()
    assert html.lstrip().startswith('<section id="experiment-progress"')
    assert "hx-trigger" not in html
    assert f"/policies/?experiment={exp.pk}" in html
    assert f"/compare/?a={a.pk}&amp;b={b.pk}" in html


def test_a_step_only_one_run_took_shows_as_a_gap_without_retry_notes(admin_client):
    a = refund_too_old_structured()
    b = refund_too_old_structured()
    b.steps.filter(index=2).update(index=3)
    StepFactory(
        run=b,
        index=2,
        tool_name="lookup_orders",
        input={"customer": "c1"},
        attempts=[attempt(1, ok=True, content=["0871"])],
        is_error=False,
    )
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert html.count('class="gap-note">no such step') == 1
    assert "no retry: the result went back to the model" not in html
    assert "Run B called lookup_orders; run A has no such step." in html


def test_the_run_list_of_one_experiment_says_so_and_links_back_to_all_runs(admin_client):
    exp = ExperimentFactory()
    mine = RunFactory(experiment=exp)
    other = RunFactory()
    html = admin_client.get(reverse("tracer:runs"), {"experiment": exp.pk, "policy": "structured"}).content.decode()
    assert f"/runs/{mine.pk}/" in html and f"/runs/{other.pk}/" not in html
    assert f'of experiment {exp.pk} <a href="?policy=structured">(all runs)</a>' in html


def test_compare_says_when_a_run_is_still_running(admin_client):
    a = refund_too_old_starter()
    b = refund_too_old_structured(status=Run.Status.RUNNING)
    html = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert "Run B is still running: reload when it has finished" in html
    assert "Run A is still" not in html
