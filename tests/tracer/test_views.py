"""Dashboard pages: login, fragments for htmx, escaping of trace data, forms that name the bad field.

Pages are read as a person reads them (``tests.dom``): the text shown, where links go, which
element polls, never the exact markup.
"""

import pytest
from django.urls import reverse

from agents.policies import PRESET_NAMES
from tests.dom import Node, page
from tests.factories import (
    ExperimentFactory,
    RunFactory,
    StepFactory,
    failed_attempt,
    final_step,
    guard_stop,
    ok_attempt,
    refund_too_old_starter,
    refund_too_old_structured,
    tool_step,
)
from tracer.models import PolicyVariant, Run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
SCRIPT = "<script>alert('x')</script>"


def htmx(target: str) -> dict:
    return {**HTMX, "HX-Target": target}


def get(client, url: str, data=None, **kwargs) -> Node:
    response = client.get(url, data, **kwargs)
    assert response.status_code == 200, url
    return page(response)


def fragment_root(doc: Node) -> str:
    """The id of the one element an htmx fragment answers with; a whole page (``<html>``, the
    navigation) is not a fragment."""
    assert not doc.select("html, nav.top, header"), "a whole page, not a fragment"
    [root] = doc.elements
    return root.get("id", "")


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
    doc = get(client, reverse("login"))
    assert doc.one("h1").text == "Log in"
    doc.one("input[name=username]")
    doc.one("input[name=password][type=password]")


# --- runs list -------------------------------------------------------------------------------


def test_the_run_list_shows_a_simulated_run_labelled_simulated(admin_client):
    run = refund_too_old_starter()
    row = get(admin_client, reverse("tracer:runs")).one("#run-rows tr")
    assert (f"#{run.pk}", f"/runs/{run.pk}/") in row.links
    cells = row.texts("td")
    assert "refund-too-old" in cells and "simulated" in cells
    assert "2 (2 wasted)" in cells


def test_the_run_list_filters_by_policy_and_searches_answers_and_inputs(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    RunFactory(scenario="lookup-empty", search_text='lookup_orders {"customer": "zed-42"}')

    def listed(**query) -> list[str]:
        return get(admin_client, reverse("tracer:runs"), query).one("#run-rows").hrefs

    assert listed(policy="starter") == [f"/runs/{starter.pk}/"]
    assert listed(q="30 days after purchase") == [f"/runs/{structured.pk}/"]
    doc = get(admin_client, reverse("tracer:runs"), {"q": "zed-42"})
    assert [row.texts("td")[2] for row in doc.select("#run-rows tr")] == ["lookup-empty"]


def test_the_run_list_names_a_bad_filter_and_ignores_it(admin_client):
    run = RunFactory()
    doc = get(admin_client, reverse("tracer:runs"), {"status": "exploded"})
    assert doc.texts(".error") == ["Status: Select a valid choice. exploded is not one of the available choices."]
    assert doc.one("#run-rows").hrefs == [f"/runs/{run.pk}/"]


def test_htmx_polling_the_run_list_gets_only_the_rows(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    doc = get(admin_client, reverse("tracer:runs"), headers=htmx("run-rows"))
    assert fragment_root(doc) == "run-rows"
    assert doc.hrefs == [f"/runs/{run.pk}/"]


def test_htmx_filtering_the_run_list_gets_only_the_table(admin_client):
    run = RunFactory()
    doc = get(admin_client, reverse("tracer:runs"), {"policy": "structured"}, headers=htmx("run-table"))
    assert fragment_root(doc) == "run-table"
    assert doc.one("#run-rows").hrefs == [f"/runs/{run.pk}/"]


def test_the_run_list_paginates(admin_client):
    for _ in range(51):
        RunFactory()
    doc = get(admin_client, reverse("tracer:runs"))
    assert len(doc.select("#run-rows tr")) == 50
    pager = doc.one(".pager")
    assert "page 1 of 2" in pager.text
    assert ("older →", "?page=2") in pager.links


# --- run page --------------------------------------------------------------------------------


def test_the_run_page_shows_every_attempt_the_banner_and_the_transcript_toggle(admin_client):
    run = refund_too_old_starter(transcript=[{"role": "user", "content": "Please refund order 0871"}])
    doc = get(admin_client, reverse("tracer:run", args=[run.pk]))
    step = doc.one("#step-1")
    assert len(step.select(".attempt.fail")) == 3
    assert "is_error" in step.text and "not retryable" in step.text
    banner = doc.one(".banner")
    assert banner.text.startswith(f"Stopped: {Run.StopReason.FINAL_ANSWER.label} fail")
    assert "generic error" in banner.text
    transcript = doc.one("#run-transcript")
    assert transcript.tag == "details" and "Please refund order 0871" in transcript.text
    assert "simulated" in doc.texts(".badge")


def test_the_run_page_shows_each_attempt_as_the_starter_harness_saw_it(admin_client):
    run = refund_too_old_starter()
    step = get(admin_client, reverse("tracer:run", args=[run.pk])).one("#step-1")
    assert step.texts(".attempt .outcome") == ['bare "Error"'] * 3
    assert all("tool knew: business · Refunds close after 30 days" in a.text for a in step.select(".attempt"))


def test_the_run_page_links_other_policies_with_compare(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    doc = get(admin_client, reverse("tracer:run", args=[starter.pk]))
    assert ("compare", f"/compare/?a={starter.pk}&b={structured.pk}") in doc.links


def test_the_run_page_lists_child_runs_and_the_child_links_its_parent(admin_client):
    parent = RunFactory(scenario="coordinator-partial")
    child = RunFactory(scenario="coordinator-partial", parent=parent, label="lookup order 1050")
    doc = get(admin_client, reverse("tracer:run", args=[parent.pk]))
    assert (f"#{child.pk} lookup order 1050", f"/runs/{child.pk}/") in doc.links
    doc = get(admin_client, reverse("tracer:run", args=[child.pk]))
    assert (f"parent run #{parent.pk}", f"/runs/{parent.pk}/") in doc.links


def test_a_guard_stop_banner_names_the_guard_and_the_errors_that_tripped_it(admin_client):
    run = guard_stop()
    banner = get(admin_client, reverse("tracer:run", args=[run.pk])).one(".banner")
    assert "Guard: 3 tool errors in a row." in banner.text
    assert [link for link in banner.links if link[1].startswith("#")] == [
        ("step 1", "#step-1"),
        ("step 2", "#step-2"),
        ("step 3", "#step-3"),
    ]
    assert "unknown customer c-404 (try 3)" in banner.text


def test_a_running_run_polls_for_new_steps_and_a_finished_one_does_not(admin_client):
    running = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    StepFactory(run=running, index=1)
    [poller] = get(admin_client, reverse("tracer:run", args=[running.pk])).pollers
    assert poller["hx-get"] == f"/runs/{running.pk}/steps/?after=1"

    finished = refund_too_old_structured()
    assert get(admin_client, reverse("tracer:run", args=[finished.pk])).pollers == []


def test_the_step_poll_returns_only_new_steps_and_the_status(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    StepFactory(run=run, event=tool_step(1, [failed_attempt(1)], tool="lookup_orders"))
    StepFactory(run=run, event=tool_step(2, [failed_attempt(1)], tool="process_refund"))
    doc = get(admin_client, reverse("tracer:run-steps", args=[run.pk]), {"after": 1}, headers=HTMX)
    assert not doc.select("html, nav")
    assert [step["id"] for step in doc.select(".step")] == ["step-2"]
    [poller] = doc.pollers
    assert poller["hx-get"] == f"/runs/{run.pk}/steps/?after=2"
    status = doc.one("#run-status")
    assert status.get("hx-swap-oob") == "true" and "running" in status.text


def test_the_step_poll_stops_once_the_run_has_finished(admin_client):
    run = refund_too_old_structured()
    doc = get(admin_client, reverse("tracer:run-steps", args=[run.pk]), {"after": 2}, headers=HTMX)
    assert doc.pollers == []
    assert doc.one("#run-status").get("hx-swap-oob") == "true" and "Stopped:" in doc.one(".banner").text
    assert doc.one("#run-transcript").get("hx-swap-oob") == "true"
    assert doc.select(".step") == []


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
        event=tool_step(
            1,
            [failed_attempt(1, message=SCRIPT), ok_attempt(2, {"html": SCRIPT})],
            input={"order_id": SCRIPT},
            result_content={"error": SCRIPT},
            text=SCRIPT,
        ),
    )
    StepFactory(run=run, event=final_step(2, SCRIPT))
    other = RunFactory(policy_name="starter", final_answer=SCRIPT)
    StepFactory(run=other, event=tool_step(1, [failed_attempt(1, message=SCRIPT)], input={"order_id": SCRIPT}))

    pages = [
        reverse("tracer:run", args=[run.pk]),
        reverse("tracer:runs"),
        f"{reverse('tracer:compare')}?a={run.pk}&b={other.pk}",
    ]
    for url in pages:
        response = admin_client.get(url)
        assert SCRIPT not in response.content.decode(), url  # never the raw markup, in any form
        doc = page(response)
        assert all(script.get("src") for script in doc.select("script")), url  # no inline script appeared
        assert SCRIPT in doc.text, url  # shown as the text it is


def test_html_in_a_guard_stops_error_text_is_shown_as_text(admin_client):
    run = guard_stop()
    run.steps.update(input={"customer": SCRIPT})
    run.steps.filter(index=3).update(attempts=[failed_attempt(1, category="validation", message=SCRIPT).to_dict()])
    response = admin_client.get(reverse("tracer:stops"))
    assert SCRIPT not in response.content.decode()
    doc = page(response)
    assert all(script.get("src") for script in doc.select("script"))
    assert f'lookup_orders({{"customer": "{SCRIPT}"}})' in doc.one(".failing-calls").text


# --- compare ---------------------------------------------------------------------------------


def test_compare_highlights_the_split_where_starter_retried_and_structured_answered(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert doc.text.count("This is where the runs split") == 1
    left, right = doc.one(".attempt-line.is-split").select(".cell")
    assert "Retry · attempt 2" in left.text
    assert "no retry: the result went back to the model" in right.text
    assert 'Cause: this outcome differed — bare "Error" against business · not retryable' in doc.text
    assert "different scenarios" not in doc.text


def test_compare_summarises_the_differences(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    table = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk}).one("table.diffs")
    assert table.texts("tbody th") == [
        "Tool calls",
        "Failed steps",
        "Failed attempts",
        "Retries",
        "Retries spent on non-retryable errors",
        "Tokens",
        "Stop reason",
        "Verdict",
        "Final answer",
    ]
    assert table.texts("tr.differs th") == [
        "Failed attempts",  # three failed tries against one
        "Retries",
        "Retries spent on non-retryable errors",
        "Tokens",
        "Verdict",
        "Final answer",
    ]


def test_compare_accepts_the_two_ticked_runs_of_the_list(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    doc = get(admin_client, f"{reverse('tracer:compare')}?run={b.pk}&run={a.pk}")
    assert "This is where the runs split" in doc.text
    cards = doc.select(".compare-heads .run-card")
    assert [card.links[0][0] for card in cards] == [f"#{a.pk}", f"#{b.pk}"]  # the older run is A


def test_compare_warns_when_the_scenarios_differ(admin_client):
    a = refund_too_old_starter()
    b = RunFactory(scenario="lookup-empty")
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert (
        "These runs are of different scenarios (refund-too-old and lookup-empty)"
        in doc.one(".warning[role=alert]").text
    )


def test_compare_without_runs_offers_a_typeahead_picker_and_suggested_pairs_and_no_error(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    RunFactory(scenario="lookup-flaky", source=Run.Source.IMPORT, model_backend="imported")
    doc = get(admin_client, reverse("tracer:compare"))
    assert doc.texts(".error") == []
    picker = doc.one("form.compare-picker")
    assert [label.text.split(" ")[:2] for label in picker.select("label")] == [["Run", "A"], ["Run", "B"]]
    assert picker.select("select") == [] and picker.one("input[name=a]")["value"] == ""
    [pair] = doc.select(".suggested-pairs li")
    assert pair.one("a")["href"] == f"{reverse('tracer:compare')}?a={starter.pk}&b={structured.pk}"
    assert pair.text.startswith("refund-too-old: starter vs structured")


def test_the_typeahead_finds_runs_by_id_scenario_policy_or_label_newest_first(admin_client):
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    other = RunFactory(
        scenario="lookup-flaky",
        policy_name="patient",
        source=Run.Source.IMPORT,
        model_backend="imported",
        label="night",
    )
    url = reverse("tracer:compare-suggest")

    def picks(side, text):
        doc = get(admin_client, url, {"side": side, side: text})
        return [b["data-run"] for b in doc.select(f"#suggest-{side} button[data-pick={side}]")]

    assert picks("a", "refund") == [str(structured.pk), str(starter.pk)]
    assert picks("b", "STRUCT") == [str(structured.pk)]
    assert picks("a", "night") == [str(other.pk)]
    assert picks("a", f"#{starter.pk}") == [str(starter.pk)]
    assert picks("a", "") == [str(other.pk), str(structured.pk), str(starter.pk)]
    doc = get(admin_client, url, {"side": "a", "a": "refund"})
    assert doc.one(f"button[data-run='{starter.pk}']").text.startswith(
        f"#{starter.pk} · starter · finished · fail · simulated"
    )
    assert get(admin_client, url, {"side": "a", "a": "nothing"}).texts("p") == ["No run matches “nothing”."]
    response = admin_client.get(url, {"side": "c"})
    assert response.status_code == 400 and b"side: expected a or b" in response.content
    said = get(admin_client, url, {"side": "a", "a": "r" * 201}).texts("p")
    assert said == ["Search text: at most 200 characters; got 201."]  # said, not cut to 200 and searched


def test_the_picker_escapes_what_a_trace_named_its_scenario_and_label(admin_client):
    run = RunFactory(scenario=SCRIPT, label=SCRIPT, policy_name="starter")
    RunFactory(scenario=SCRIPT, policy_name="structured")
    response = admin_client.get(reverse("tracer:compare"))
    assert SCRIPT not in response.content.decode()
    doc = page(response)
    assert all(script.get("src") for script in doc.select("script"))
    assert doc.one(".suggested-pairs li strong").text == SCRIPT
    response = admin_client.get(reverse("tracer:compare-suggest"), {"side": "a", "a": ""})
    assert SCRIPT not in response.content.decode()
    assert page(response).one(f"button[data-run='{run.pk}']").text.startswith(f"#{run.pk} · starter")


def test_the_picker_compares_the_two_runs_picked(admin_client):
    a, b = refund_too_old_starter(), refund_too_old_structured()
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert [i["value"] for i in doc.select("form.compare-picker input[type=text]")] == [str(a.pk), str(b.pk)]
    assert len(doc.select(".compare-heads .run-card")) == 2


def test_compare_names_the_missing_run_field(admin_client):
    RunFactory()
    doc = get(admin_client, reverse("tracer:compare"), {"a": "7"})
    assert doc.texts(".error") == ["Run B: pick a run"]
    assert doc.one("input[name=b]")["aria-invalid"] == "true"
    a = RunFactory()
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": a.pk})
    assert [e for e in doc.texts(".error") if e.startswith("Run B: pick a different run from run A")]


def test_compare_of_an_unknown_run_says_which_run_is_not_there(admin_client):
    a = RunFactory()
    response = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": 99999})
    assert response.status_code == 404
    doc = page(response)
    assert doc.texts(".error") == ["Run B: there is no run #99999"]
    assert doc.one("form.compare-picker input[name=a]")["value"] == str(a.pk)  # the picker to choose again


# --- policies --------------------------------------------------------------------------------


def test_the_policy_matrix_aggregates_each_cell_and_links_to_its_runs(admin_client):
    refund_too_old_starter()
    refund_too_old_starter(verdict=Run.Verdict.PASS)
    refund_too_old_structured()
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED, verdict=Run.Verdict.FAIL)
    matrix = get(admin_client, reverse("tracer:policies"), {"cells": "detail"}).one("#policy-matrix")

    def cell(policy: str) -> Node:
        return matrix.one(f'a.cell-link[href="/?scenario=refund-too-old&policy={policy}"]')

    assert "pass 1/2" in cell("starter").text and "2 runs" in cell("starter").text
    assert "pass 1/1" in cell("structured").text
    assert "1 crash" in cell("fragile").text
    assert cell("starter").select("svg.bar.pass")


def test_the_policy_matrix_is_a_heat_map_by_default_its_figures_in_words(admin_client):
    refund_too_old_starter()
    refund_too_old_starter(verdict=Run.Verdict.PASS)
    refund_too_old_structured()
    RunFactory(policy_name="message", verdict="")  # unjudged
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED, verdict=Run.Verdict.FAIL)
    matrix = get(admin_client, reverse("tracer:policies")).one("#policy-matrix")
    assert not matrix.select("a.cell-link")  # the detailed cells are a link away

    def cell(policy: str) -> Node:
        return matrix.one(f'a.heat[href="/?scenario=refund-too-old&policy={policy}"]')

    assert cell("starter").text == "50" and "h2" in cell("starter")["class"]
    assert cell("starter")["aria-label"] == cell("starter")["title"]
    assert cell("starter")["title"].startswith("refund-too-old under starter: 1/2 judged passed, 50 % (95 % interval ")
    assert "2 runs" in cell("starter")["title"] and "2 simulated" in cell("starter")["title"]
    assert cell("structured").text == "100" and "h4" in cell("structured")["class"]
    assert cell("message").text == "?" and "unjudged" in cell("message")["class"]  # not a fail
    assert "no verdict, unjudged" in cell("message")["title"] and "h0" not in cell("message")["class"]
    assert "1 crash;" in cell("fragile")["title"] and cell("fragile").select(".heat-flag")
    assert "h0" in cell("fragile")["class"]
    assert "Detailed cells" in matrix.one(".matrix-view").text


def test_the_policy_matrix_shows_only_the_chosen_columns(admin_client):
    refund_too_old_starter()
    refund_too_old_structured()
    doc = get(admin_client, reverse("tracer:policies"), {"policy": "structured"}, headers=htmx("policy-matrix"))
    assert not doc.select("html, nav.top, header"), "a whole page, not a fragment"
    matrix, summary = doc.elements  # the summary follows the columns out of band
    assert matrix.get("id") == "policy-matrix" and matrix.texts("thead th") == ["Scenario", "structured"]
    assert summary.get("id") == "policy-summary" and summary.get("hx-swap-oob") == "true"
    assert summary.texts("table.totals tbody th") == ["structured simulated"]


def test_creating_a_policy_variant_triggers_an_event_and_returns_a_fresh_form(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"),
        {"name": "structured-patient", "base": "structured", "max_attempts": "5", "retry_on": "transient"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "policyCreated" in response["HX-Trigger"]
    assert page(response).one("[role=status]").text.startswith("Policy structured-patient created.")
    variant = PolicyVariant.objects.get(name="structured-patient")
    assert variant.settings["max_attempts"] == 5 and variant.settings["error_format"] == "structured"
    assert not variant.is_preset


def test_a_policy_variant_form_names_each_invalid_field(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"),
        {"name": "Bad Name!", "base": "starter", "max_attempts": "99", "backoff_jitter": "3"},
        headers=HTMX,
    )
    doc = page(response)
    assert (
        "expected lowercase letters, digits, - and _, starting with a letter or digit, at most 40 characters"
        in doc.one("#error-name").text
    )
    assert "less than or equal to 10" in doc.one("#error-max_attempts").text
    assert "less than or equal to 1" in doc.one("#error-backoff_jitter").text
    assert "HX-Trigger" not in response
    assert not PolicyVariant.objects.filter(is_preset=False).exists()


def test_a_policy_variant_name_must_be_new(admin_client):
    response = admin_client.post(reverse("tracer:policy-create"), {"name": "starter", "base": "starter"})
    assert "a policy named 'starter' already exists" in page(response).one("#error-name").text


def test_a_policy_variant_created_without_javascript_redirects_to_the_page(admin_client):
    response = admin_client.post(reverse("tracer:policy-create"), {"name": "quiet", "base": "message"})
    assert response.status_code == 302 and response["Location"] == reverse("tracer:policy-variants") + "#variant-quiet"
    assert "quiet" in get(admin_client, reverse("tracer:policy-variants")).one("#variant-quiet").text


def test_the_policy_list_refreshes_itself_as_a_fragment(admin_client):
    doc = get(admin_client, reverse("tracer:policy-variants"), headers=htmx("policy-list"))
    assert fragment_root(doc) == "policy-list"
    assert doc.elements[0]["hx-trigger"].startswith("policyCreated")  # it refreshes on that event
    assert set(PRESET_NAMES) <= set(doc.texts("[id^=variant-] strong"))


# --- launch ----------------------------------------------------------------------------------


def test_the_launch_form_names_each_missing_choice(admin_client):
    doc = page(admin_client.post(reverse("tracer:launch"), {"model_backend": "simulated", "repeats": "0"}))
    assert doc.text.count("This field is required.") == 2  # scenarios, policies
    assert "Repeats: Ensure this value is greater than or equal to 1." in doc.text


def test_the_experiment_page_polls_until_done_then_links_matrix_and_pairs(admin_client):
    exp = ExperimentFactory(total_runs=2, finished_runs=1)
    a = refund_too_old_starter(experiment=exp)
    b = refund_too_old_structured(experiment=exp, status=Run.Status.RUNNING)
    doc = get(admin_client, reverse("tracer:experiment", args=[exp.pk]))
    assert [p["id"] for p in doc.pollers] == ["experiment-progress"] and "Open its matrix" not in doc.text

    exp.finished_runs = 2
    exp.save()
    Run.objects.filter(pk=b.pk).update(status=Run.Status.FINISHED)
    doc = get(admin_client, reverse("tracer:experiment", args=[exp.pk]), headers=HTMX)
    assert fragment_root(doc) == "experiment-progress"
    assert doc.pollers == []
    assert ("Open its matrix", f"/policies/?experiment={exp.pk}") in doc.links
    assert ("refund-too-old", f"/compare/?a={a.pk}&b={b.pk}") in doc.links


def a_done_experiment_of(n: int):
    """An experiment of ``n`` finished runs, starter and structured in turn, every third failing."""
    exp = ExperimentFactory(total_runs=n, finished_runs=n)
    runs = [
        RunFactory(
            experiment=exp,
            policy_name=("starter", "structured")[i % 2],
            verdict=Run.Verdict.FAIL if i % 3 == 0 else Run.Verdict.PASS,
        )
        for i in range(n)
    ]
    return exp, runs


def shown_runs(doc: Node) -> list[str]:
    return [row.one("td a").text for row in doc.select("table.runs tbody tr")]


def test_the_experiment_page_shows_50_runs_a_page_and_the_next_ones_on_page_2_with_the_totals_of_all(admin_client):
    exp, runs = a_done_experiment_of(62)
    url = reverse("tracer:experiment", args=[exp.pk])
    first, second = get(admin_client, url), get(admin_client, url, {"page": "2"})

    assert shown_runs(first) == [f"#{r.pk}" for r in runs[:50]]
    assert shown_runs(second) == [f"#{r.pk}" for r in runs[50:]]
    assert "runs 1–50 of 62" in first.one("nav.pager").text and "runs 51–62 of 62" in second.one("nav.pager").text
    assert ("later →", "?page=2") in first.links and ("← earlier", "?page=1") in second.links
    for doc in (first, second):  # what it says of all its runs is the same on each page
        assert "62 of 62 runs finished" in doc.text
        assert doc.one("#policy-summary").text == first.one("#policy-summary").text
        assert [link for link in doc.links if link[1].startswith("/compare/?")] == [
            ("refund-too-old", f"/compare/?a={runs[0].pk}&b={runs[1].pk}")
        ]


def test_the_experiment_pages_runs_page_is_swapped_in_place_and_its_poll_keeps_the_page(admin_client):
    exp, runs = a_done_experiment_of(55)
    exp.finished_runs = 54
    exp.save()
    url = reverse("tracer:experiment", args=[exp.pk])
    doc = get(admin_client, url, {"page": "2"}, headers=HTMX)
    assert fragment_root(doc) == "experiment-progress"
    assert shown_runs(doc) == [f"#{r.pk}" for r in runs[50:]]
    assert [p["hx-get"] for p in doc.pollers] == [f"{url}?page=2"]
    later = doc.one("nav.pager a")
    assert (later["hx-get"], later["hx-target"], later["hx-push-url"]) == ("?page=1", "#experiment-progress", "true")


def test_an_experiment_page_past_its_last_page_shows_the_last_and_one_not_a_number_the_first(admin_client):
    exp, runs = a_done_experiment_of(51)
    url = reverse("tracer:experiment", args=[exp.pk])
    assert shown_runs(get(admin_client, url, {"page": "9"})) == [f"#{runs[50].pk}"]
    for bad in ("abc", "-1", "0", ""):
        assert shown_runs(get(admin_client, url, {"page": bad})) == [f"#{r.pk}" for r in runs[:50]]


def test_an_experiment_of_one_page_has_no_pager(admin_client):
    exp, _ = a_done_experiment_of(3)
    assert not get(admin_client, reverse("tracer:experiment", args=[exp.pk])).select("nav.pager")


def test_a_step_only_one_run_took_shows_as_a_gap_without_retry_notes(admin_client):
    a = refund_too_old_structured()
    b = refund_too_old_structured()
    b.steps.filter(index=2).update(index=3)
    StepFactory(run=b, event=tool_step(2, [ok_attempt(1, ["0871"])], tool="lookup_orders", input={"customer": "c1"}))
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert doc.texts(".cell").count("no such step") == 1
    assert "no retry: the result went back to the model" not in doc.text
    assert "Run B called lookup_orders; run A has no such step." in doc.text


def test_the_run_list_of_one_experiment_says_so_and_links_back_to_all_runs(admin_client):
    exp = ExperimentFactory()
    mine = RunFactory(experiment=exp)
    RunFactory()  # of no experiment: not listed
    doc = get(admin_client, reverse("tracer:runs"), {"experiment": exp.pk, "policy": "structured"})
    assert doc.one("#run-rows").hrefs == [f"/runs/{mine.pk}/"]
    assert f"1 run of experiment {exp.pk} (all runs)" in doc.text
    assert ("(all runs)", "?policy=structured") in doc.links


def test_compare_says_when_a_run_is_still_running(admin_client):
    a = refund_too_old_starter()
    b = refund_too_old_structured(status=Run.Status.RUNNING)
    doc = get(admin_client, reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert [w for w in doc.texts("[role=status]") if w.startswith("Run ")] == [
        "Run B is still running: reload when it has finished to compare the whole runs."
    ]
