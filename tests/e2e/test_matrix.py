"""A person deciding which policy is better: pick the experiments and the model backend, read the totals,
the verdict and the chart, narrow the columns; and the experiment page's summary. No CSP violation."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_csp import LISTEN, violations
from tests.factories import ExperimentFactory, RunFactory
from tests.tracer.intake.samples import starter_transcript, structured_transcript
from tracer.models import Run


def runs(n: int, *, passes: int, **fields) -> None:
    for i in range(n):
        RunFactory(verdict=Run.Verdict.PASS if i < passes else Run.Verdict.FAIL, **fields)


@pytest.fixture
def watched(signed_in: Page):
    console: list[str] = []
    signed_in.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    signed_in.add_init_script(LISTEN)
    return signed_in, console


def totals_rows(page: Page):
    return page.locator("#policy-summary table.totals tbody tr")


def test_pick_experiments_and_a_backend_then_read_totals_verdict_and_chart(watched, live_server):
    page, console = watched
    study = ExperimentFactory(name="retry study", policies=["starter", "structured"])
    demo = ExperimentFactory(name="old demo")
    for scenario in ("refund-too-old", "lookup-flaky", "booking"):
        runs(6, passes=6, scenario=scenario, policy_name="structured", experiment=study, wasted_retry_count=0)
        runs(6, passes=2, scenario=scenario, policy_name="starter", experiment=study, wasted_retry_count=2)
    runs(4, passes=4, policy_name="starter", experiment=demo)
    runs(3, passes=0, policy_name="structured", model_backend="claude", model_name="claude-haiku-4-5")

    page.get_by_role("link", name="Policies", exact=True).click()
    summary = page.locator("#policy-summary")
    expect(summary).to_contain_text("These runs mix model backends (claude 3, simulated 40)")
    expect(totals_rows(page)).to_have_count(2)

    # the pickers: two experiments (the claude runs belong to none), then one and the simulated backend
    pickers = page.locator(".matrix-runs")
    pickers.get_by_label(re.compile("retry study")).check()
    pickers.get_by_label(re.compile("old demo")).check()
    page.get_by_role("button", name="Count these runs").click()
    expect(page).to_have_url(
        re.compile(rf"experiment={study.pk}&experiment={demo.pk}|experiment={demo.pk}&experiment={study.pk}")
    )
    expect(totals_rows(page).filter(has_text="starter").locator("td").nth(0)).to_have_text("22")
    expect(totals_rows(page).filter(has_text="structured").locator("td").nth(0)).to_have_text("18")
    expect(summary).not_to_contain_text("mix model backends")
    pickers.get_by_label(re.compile("old demo")).uncheck()
    page.get_by_label("Model backend").select_option("simulated")
    page.get_by_role("button", name="Count these runs").click()
    expect(page).to_have_url(re.compile(rf"experiment={study.pk}.*model_backend=simulated"))
    expect(page.locator(".matrix-runs").get_by_label(re.compile("retry study"))).to_be_checked()
    expect(page.locator(".matrix-runs").get_by_label(re.compile("old demo"))).not_to_be_checked()
    expect(summary).not_to_contain_text("mix model backends")
    expect(summary.locator(".verdict-line")).to_have_text(
        "structured passed 18/18 vs starter 6/18; the difference is beyond the noise at this n."
    )
    starter = totals_rows(page).filter(has_text="starter")
    expect(starter.locator("td").nth(0)).to_have_text("18")
    expect(starter.locator("td").nth(1)).to_have_text("0")  # unjudged
    expect(starter.locator("td").nth(2)).to_have_text("6/18 · 33 % (16–57 %)")
    expect(starter).to_contain_text("36 (2.0/run)")  # wasted retries
    expect(starter).to_contain_text("simulated")
    bars = summary.locator("svg.policy-chart g.row")
    expect(bars).to_have_count(2)
    expect(bars.nth(0)).to_have_attribute(
        "aria-label",
        "starter: passed 6 of 18 judged runs (33 %, 95 % interval 16–57 %); 2.0 wasted retries per run (36 in all)",
    )
    expect(bars.nth(1).locator("text.figure").first).to_have_text("100 % · 18/18 (82–100 %)")

    # narrowing the columns swaps the matrix and its summary, and keeps the pickers' choice
    page.locator("form.columns").get_by_label("starter", exact=True).uncheck()
    expect(page).to_have_url(re.compile(r"policy=structured"))
    expect(page).to_have_url(re.compile(rf"experiment={study.pk}"))
    expect(page.locator("#policy-matrix thead th")).to_have_text(["Scenario", "structured"])
    expect(totals_rows(page)).to_have_count(1)
    expect(summary.locator(".verdict-line")).to_have_text("Only structured has runs here: nothing to compare it with.")
    expect(bars).to_have_count(1)

    # the cell's runs are the experiment's, of that backend
    page.locator("#policy-matrix a.heat").first.click()
    expect(page).to_have_url(re.compile(rf"experiment={study.pk}.*model_backend=simulated"))
    expect(page.locator("#run-rows tr")).to_have_count(6)
    assert violations(page, console) == []


def test_the_experiment_page_shows_the_summary_and_opens_its_matrix(watched, live_server):
    page, console = watched
    exp = ExperimentFactory(scenarios=["refund-too-old", "lookup-flaky"], policies=["starter", "structured"], repeats=3)
    for scenario in exp.scenarios:
        runs(3, passes=2, scenario=scenario, policy_name="starter", experiment=exp)
        runs(3, passes=3, scenario=scenario, policy_name="structured", experiment=exp)
    exp.total_runs = exp.finished_runs = 12
    exp.save()

    page.goto(f"{live_server.url}/experiments/{exp.pk}/")
    progress = page.locator("#experiment-progress")
    expect(progress.locator(".verdict-line")).to_have_text(
        "structured passed 6/6 vs starter 4/6; the difference isn't beyond the noise at this n"
        " (more repeats would tell)."
    )
    expect(progress.locator("svg.policy-chart g.row")).to_have_count(2)
    expect(progress.locator("a[href^='/compare/?']")).to_have_count(2)  # one per scenario, not six

    progress.get_by_role("link", name="Open its matrix").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Policies")
    expect(page.locator(".matrix-runs input[name=experiment]:checked")).to_have_count(1)
    expect(totals_rows(page)).to_have_count(2)
    assert violations(page, console) == []


def test_an_experiments_runs_are_paged_and_its_summary_counts_them_all(watched, live_server):
    page, console = watched
    exp = ExperimentFactory(scenarios=["refund-too-old"], policies=["starter", "structured"], repeats=30)
    runs(30, passes=10, policy_name="starter", experiment=exp)
    runs(30, passes=30, policy_name="structured", experiment=exp)
    exp.total_runs = exp.finished_runs = 60
    exp.save()
    ids = list(Run.objects.filter(experiment=exp).order_by("id").values_list("id", flat=True))

    page.goto(f"{live_server.url}/experiments/{exp.pk}/")
    progress = page.locator("#experiment-progress")
    rows = progress.locator("table.runs tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first.locator("td").first).to_have_text(f"#{ids[0]}")
    verdict = "structured passed 30/30 vs starter 10/30"
    expect(progress.locator(".verdict-line")).to_contain_text(verdict)

    progress.get_by_role("link", name="later →").click()
    expect(page).to_have_url(re.compile(r"\?page=2$"))
    expect(rows).to_have_count(10)
    expect(rows.first.locator("td").first).to_have_text(f"#{ids[50]}")
    expect(progress.locator("nav.pager")).to_contain_text("runs 51–60 of 60")
    expect(progress.locator(".verdict-line")).to_contain_text(verdict)  # still over all 60

    page.go_back()
    expect(page).not_to_have_url(re.compile("page="))
    expect(rows).to_have_count(50)
    assert violations(page, console) == []


def test_imported_runs_with_no_verdict_are_unjudged_and_never_compared(watched, live_server, tmp_path):
    page, console = watched
    demo = ExperimentFactory(name="demo", policies=["starter", "structured"])
    for scenario in ("refund-too-old", "lookup-flaky"):
        runs(6, passes=6, scenario=scenario, policy_name="structured", experiment=demo)
        runs(6, passes=1, scenario=scenario, policy_name="starter", experiment=demo)
    files = []
    for name, transcript in (("one.json", starter_transcript()), ("two.json", structured_transcript())):
        path = tmp_path / name
        path.write_text(json.dumps(transcript))
        files.append(str(path))

    # two transcripts of another agent, imported under a policy label of their own: they carry no verdict
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Files").set_input_files(files)
    page.get_by_label("Scenario key").fill("refund-too-old")
    page.get_by_label("Policy label").fill("oi-agent")
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-report .file-report")).to_have_count(2)
    assert Run.objects.filter(policy_name="oi-agent", verdict="").count() == 2

    page.get_by_role("link", name="Policies", exact=True).click()
    summary = page.locator("#policy-summary")
    lines = summary.locator(".verdict-line")
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_contain_text("structured passed 12/12 vs starter 2/12; the difference is beyond the noise")
    expect(lines.nth(1)).to_contain_text("oi-agent is not compared: its 2 runs have no verdict (unjudged")
    expect(summary).not_to_contain_text("0/2")
    expect(summary).not_to_contain_text("vs oi-agent")
    oi = totals_rows(page).filter(has_text="oi-agent")
    expect(oi.locator("td").nth(0)).to_have_text("2")
    expect(oi.locator("td").nth(1)).to_have_text("2")
    expect(oi.locator("td").nth(2)).to_have_text("unjudged (no verdicts)")
    expect(summary.locator("svg.policy-chart g.row", has_text="oi-agent")).to_have_attribute(
        "aria-label", re.compile(r"^oi-agent: 2 runs, none judged;")
    )
    cell = page.locator("#policy-matrix a.heat.unjudged")  # shown apart, never as a fail
    expect(cell).to_have_count(1)
    expect(cell).to_have_attribute("title", re.compile(r"oi-agent: no verdict, unjudged; 2 runs; 2 imported"))
    expect(cell).to_have_text("?")

    # only structured and oi-agent as columns: nothing judged to compare structured with
    page.locator("form.columns").get_by_label("starter", exact=True).uncheck()
    expect(page).to_have_url(re.compile(r"policy=structured"))
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_have_text("Fewer than two policies have judged runs here: nothing to compare.")
    expect(lines.locator(".beyond, .noise")).to_have_count(0)  # no "beyond the noise" claim either way

    # the runs list says unjudged, and filters on it
    page.goto(f"{live_server.url}/?verdict=unjudged")
    expect(page.locator("#run-rows tr")).to_have_count(2)
    expect(page.locator("#run-rows tr").first).to_contain_text("unjudged")
    expect(page.locator("#run-rows .verdict.fail")).to_have_count(0)
    assert violations(page, console) == []
