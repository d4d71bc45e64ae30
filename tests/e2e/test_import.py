"""Importing as a person does, in Chromium: pick two transcripts of one task, watch the upload, read
the report, open the imported runs and see where they split; no Content Security Policy violation."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from tests.tracer.intake.samples import starter_transcript, structured_transcript
from tracer.models import Run

LISTEN = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(e.violatedDirective));
"""


def test_two_uploaded_transcripts_import_and_compare_where_they_split(signed_in: Page, live_server, tmp_path):
    page = signed_in
    page.add_init_script(LISTEN)
    files = []
    for name, transcript in (("starter.json", starter_transcript()), ("structured.json", structured_transcript())):
        path = tmp_path / name
        path.write_text(json.dumps(transcript))
        files.append(str(path))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "rlt.run/1", "steps": [{"kind": "tool_call"}]}\n')
    files.append(str(bad))

    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Import").click()
    page.get_by_label("Files").set_input_files(files)
    page.get_by_label("Scenario key").fill("refund-too-old")
    page.get_by_role("button", name="Import").click()

    report = page.locator("#import-report")
    expect(report.locator(".file-report")).to_have_count(3)
    expect(page.locator("[data-upload-text]")).to_have_text("Done: the report is below.")
    expect(page.locator("progress[data-upload-bar]")).to_have_attribute("value", "100")
    refused = report.locator(".file-report", has_text="bad.jsonl")
    expect(refused).to_contain_text("steps[0].kind")
    expect(refused).to_contain_text("expected one of tool_use, final_answer, model_stop; got 'tool_call'")
    assert page.evaluate("window.cspViolations") == []

    starter = Run.objects.get(source_detail="starter.json")
    structured = Run.objects.get(source_detail="structured.json")
    Run.objects.filter(pk=starter.pk).update(policy_name="starter")
    Run.objects.filter(pk=structured.pk).update(policy_name="structured")
    report.locator(".file-report", has_text="starter.json").get_by_role("link").click()
    expect(page.locator(".head-badges .badge.imported")).to_have_text("imported · file · claude-haiku-4-5")
    page.get_by_role("link", name="compare", exact=True).click()  # the run's, not the navigation's Compare
    # The starter's model sent the refused call again: a step of its own, where the structured run answered.
    expect(page.locator(".split-summary")).to_contain_text("split at aligned step 2")
    expect(page.locator(".split-summary")).to_contain_text("business · not retryable")
    assert page.evaluate("window.cspViolations") == []


def test_an_upload_with_an_empty_file_imports_the_others_and_names_the_empty_one(
    signed_in: Page, live_server, tmp_path
):
    page = signed_in
    page.add_init_script(LISTEN)
    good = tmp_path / "starter.json"
    good.write_text(json.dumps(starter_transcript()))
    empty = tmp_path / "nothing-here.json"
    empty.write_text("")
    for size in ({"width": 1400, "height": 900}, {"width": 390, "height": 844}):
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/import/")
        page.get_by_label("Files").set_input_files([str(good), str(empty)])
        page.get_by_role("button", name="Import").click()
        report = page.locator("#import-report")
        expect(report.locator(".file-report")).to_have_count(2)
        expect(report.locator(".file-report", has_text="nothing-here.json")).to_contain_text("the file is empty")
        imported = report.locator(".file-report", has_text="starter.json")
        expect(imported).to_contain_text("1 imported")
        expect(imported.get_by_role("link", name="run #")).to_have_count(1)
    assert Run.objects.filter(source_detail="starter.json").count() == 2
    assert page.evaluate("window.cspViolations") == []


def test_an_upload_under_a_bad_scenario_key_or_policy_label_is_refused_naming_the_rule(
    signed_in: Page, live_server, tmp_path
):
    page = signed_in
    page.add_init_script(LISTEN)
    good = tmp_path / "starter.json"
    good.write_text(json.dumps(starter_transcript()))
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Files").set_input_files([str(good)])
    page.get_by_label("Scenario key").fill("<script>alert(1)</script>")
    page.get_by_label("Policy label").fill("Bad Label!")
    page.get_by_role("button", name="Import").click()
    rule = "expected lowercase letters, digits, - and _, starting with a letter or digit, at most 100 characters"
    expect(page.locator("[data-upload-text]")).to_have_text("Nothing imported: what to change is named below.")
    errors = page.locator("#import-report p.error")
    expect(errors.filter(has_text="Scenario key:")).to_contain_text(rule)
    expect(errors.filter(has_text="Policy label:")).to_contain_text("at most 40 characters; got 'Bad Label!'")
    assert page.evaluate("window.cspViolations") == []  # the key is shown as text, never run

    page.get_by_label("Files").set_input_files([str(good)])
    page.get_by_label("Scenario key").fill("a" * 101)  # one past the limit: refused, not cut
    page.get_by_label("Policy label").fill("structured")
    page.get_by_role("button", name="Import").click()
    expect(errors.filter(has_text="Scenario key:")).to_have_text(
        re.compile(r"at most 100 characters; got 101 characters$")
    )
    assert not Run.objects.exists()
