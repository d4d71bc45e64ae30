"""Importing and exporting as a person does: the upload page, the download links, manage.py
import_traces; and imported runs labelled as such wherever runs are shown, compared like any other."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.dom import page
from tests.tracer.intake.samples import TOO_OLD, document, jsonl, starter_transcript, structured_transcript
from tracer import access
from tracer.intake import files, live, schema
from tracer.intake.transcripts import transcript_arrival
from tracer.models import Experiment, Run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def upload(name: str, data) -> SimpleUploadedFile:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    return SimpleUploadedFile(name, body, content_type="application/json")


def imported_pair() -> tuple[Run, Run]:
    """The same task imported as two transcripts under two policy labels."""
    runs = []
    for policy, transcript in (("starter", starter_transcript()), ("structured", structured_transcript())):
        meta = {"scenario": "refund-too-old", "policy": policy}
        runs.append(files.run_import(arrival=transcript_arrival(transcript=transcript, **meta)))
    return runs[0], runs[1]


# --- the upload page --------------------------------------------------------------------------


def test_the_upload_page_imports_several_files_and_reports_each_document(admin_client):
    bad = document()
    bad["steps"][0]["attempts"][0]["category"] = "x"
    files = [
        upload("lesson.json", document()),
        upload("batch.jsonl", jsonl(document(external_id="a"), bad)),
        upload("chat.json", starter_transcript()),
    ]
    response = admin_client.post(
        reverse("tracer:import"), {"files": files, "scenario": "refund-too-old", "policy": "mine"}, headers=HTMX
    )
    assert response.status_code == 200
    report = page(response)
    assert [h.text for h in report.select(".file-report h2")] == ["lesson.json", "batch.jsonl", "chat.json"]
    refused = report.one("tr.refused")
    assert "line 2" in refused.text and "steps[0].attempts[0].category" in refused.text
    assert "expected one of validation, transient, permission, business, fatal; got 'x'" in refused.text
    assert Run.objects.count() == 3
    assert set(Run.objects.values_list("scenario", "policy_name")) == {("refund-too-old", "mine")}
    run = Run.objects.get(source_detail="chat.json")
    assert reverse("tracer:run", args=[run.pk]) in report.hrefs


def test_the_upload_page_without_htmx_renders_the_whole_page_with_the_report(admin_client):
    response = admin_client.post(reverse("tracer:import"), {"files": [upload("lesson.json", document())]})
    doc = page(response)
    assert doc.one("form[data-upload-progress]") and doc.one("progress[data-upload-bar]")
    assert "1 imported" in doc.one(".file-report").text


def test_the_upload_page_without_files_says_which_field_is_missing(admin_client):
    response = admin_client.post(reverse("tracer:import"), {"scenario": "x"}, headers=HTMX)
    assert "Files: This field is required." in page(response).text
    assert not Run.objects.exists()


def test_the_upload_page_is_in_the_navigation_for_those_who_may_import(admin_client, client, django_user_model):
    assert reverse("tracer:import") in page(admin_client.get(reverse("tracer:runs"))).one("header nav").hrefs
    client.force_login(django_user_model.objects.create_user("paul"))
    assert reverse("tracer:import") not in page(client.get(reverse("tracer:runs"))).one("header nav").hrefs


def test_a_plain_user_or_reviewer_cannot_import_and_is_told_why(client, django_user_model):
    reviewer = django_user_model.objects.create_user("rita")
    reviewer.groups.add(Group.objects.get(name=access.REVIEWER_GROUP))
    client.force_login(reviewer)
    response = client.post(reverse("tracer:import"), {"files": [upload("lesson.json", document())]})
    assert response.status_code == 403 and "import runs" in response.content.decode()
    assert not Run.objects.exists()


def test_a_group_given_add_run_may_import(client, django_user_model):
    from django.contrib.auth.models import Permission

    engineer = django_user_model.objects.create_user("erin")
    engineer.user_permissions.add(Permission.objects.get(codename="add_run"))
    client.force_login(engineer)
    response = client.post(reverse("tracer:import"), {"files": [upload("lesson.json", document())]})
    assert response.status_code == 200 and Run.objects.get().owner == engineer


def test_everything_from_an_imported_trace_is_shown_escaped(admin_client):
    data = document(task="<script>alert('task')</script>", labels={"<b>k</b>": "<img src=x onerror=alert(1)>"})
    data["steps"][1]["text"] = "<script>alert('answer')</script>"
    admin_client.post(reverse("tracer:import"), {"files": [upload("<i>evil</i>.json", data)]}, headers=HTMX)
    run = Run.objects.get()
    html = admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode()
    assert "<script>alert(" not in html and "<img src=x" not in html and "<i>evil</i>" not in html
    assert "&lt;script&gt;alert(&#x27;answer&#x27;)&lt;/script&gt;" in html


# --- imported runs wherever runs are shown ----------------------------------------------------


def test_imported_runs_are_labelled_imported_on_the_list_run_compare_and_matrix_pages(admin_client):
    a, b = imported_pair()
    runs_page = page(admin_client.get(reverse("tracer:runs")))
    assert [badge.text for badge in runs_page.select(".badge.imported")] == ["imported · file · claude-haiku-4-5"] * 2
    run_page = page(admin_client.get(reverse("tracer:run", args=[a.pk])))
    assert run_page.one(".head-badges .badge.imported") and "not executed here" in run_page.one(".imported-note").text
    compare_page = page(admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}))
    assert len(compare_page.select(".run-card .badge.imported")) == 2
    matrix = page(admin_client.get(reverse("tracer:policies")))
    # Each policy's totals row says its runs were imported, and so does each scenario's cell.
    assert [badge.text for badge in matrix.select("tr[id^=totals] .badge.imported")] == ["imported", "imported"]
    assert all("1 imported" in square["aria-label"] for square in matrix.select("table.matrix a.heat"))
    detailed = page(admin_client.get(reverse("tracer:policies"), {"cells": "detail"}))
    assert [badge.text for badge in detailed.select(".flags .badge.imported")] == ["1 imported", "1 imported"]


def test_the_run_list_filters_runs_by_where_they_came_from(admin_client):
    imported_pair()
    Run.objects.create(scenario="refund-too-old", policy_name="structured", status=Run.Status.FINISHED)
    doc = page(admin_client.get(reverse("tracer:runs"), {"source": "import"}))
    assert len(doc.select("#run-rows tr")) == 2 and len(doc.select(".badge.imported")) == 2


def test_two_imported_transcripts_of_one_task_split_where_the_starter_retried(admin_client):
    a, b = imported_pair()
    doc = page(admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}))
    summary = doc.one(".split-summary").text
    # The starter's model sent the refused call again: a step of its own, where run B answered.
    assert "split at aligned step 2" in summary
    assert "Run A called process_refund; run B has no such step" in summary
    assert "business · not retryable" in summary
    assert TOO_OLD in doc.text


def test_an_imported_run_is_offered_for_comparison_with_built_in_runs_of_its_scenario(admin_client):
    built_in = Run.objects.create(scenario="refund-too-old", policy_name="message", status=Run.Status.FINISHED)
    a, _ = imported_pair()
    doc = page(admin_client.get(reverse("tracer:run", args=[a.pk])))
    assert f"{reverse('tracer:compare')}?a={a.pk}&b={built_in.pk}" in doc.hrefs
    matrix = page(admin_client.get(reverse("tracer:policies")))
    rows = matrix.select("table.matrix tbody tr")
    assert len(rows) == 1  # one scenario row: the built-in run and the imported ones together
    assert [th.text for th in matrix.select("table.matrix thead th")] == [
        "Scenario",
        "message",
        "starter",
        "structured",
    ]


def test_an_imported_run_a_guard_stopped_is_in_the_stop_queue_labelled_imported(admin_client):
    data = document(stop_reason="consecutive_errors", guard="3 tool errors in a row")
    data["steps"] = data["steps"][:1]
    run = files.run_import(arrival=files.item_arrival(data=data))
    queue = page(admin_client.get(reverse("tracer:stops")))
    case = queue.one(f"#stop-{run.pk}")
    assert case.one(".badge.imported") and "process_refund" in case.text


# --- downloads --------------------------------------------------------------------------------


def test_a_run_downloads_as_its_run_document(admin_client):
    a, _ = imported_pair()
    run_page = page(admin_client.get(reverse("tracer:run", args=[a.pk])))
    url = reverse("tracer:run-export", args=[a.pk])
    assert url in run_page.hrefs
    response = admin_client.get(url)
    assert response["Content-Disposition"] == f'attachment; filename="run-{a.pk}.json"'
    exported = json.loads(response.content)
    # The model sent process_refund three times: three steps, the later two repeats, and the answer.
    assert exported["format"] == "rlt.run/1" and len(exported["steps"]) == 4
    steps = schema.document_validate(exported).steps
    assert [step.retry_count for step in steps] == [0, 0, 0, 0]


def test_a_compare_pair_downloads_as_two_lines_that_import_back(admin_client):
    a, b = imported_pair()
    compare_page = page(admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk}))
    url = f"{reverse('tracer:compare-export')}?a={a.pk}&b={b.pk}"
    assert url in compare_page.hrefs
    response = admin_client.get(url)
    assert response["Content-Disposition"] == f'attachment; filename="compare-{a.pk}-{b.pk}.jsonl"'
    report = files.file_import(name="pair.jsonl", data=response.content)
    assert report.imported == 2 and Run.objects.count() == 4


def test_a_bad_compare_download_says_which_run_id_is_wrong(admin_client):
    response = admin_client.get(reverse("tracer:compare-export"), {"a": "x", "b": "1"})
    assert response.status_code == 400 and "run A" in response.content.decode()


def test_an_experiment_downloads_as_json_lines_of_its_runs(admin_client):
    experiment = Experiment.objects.create(name="e", total_runs=2)
    for n in range(2):
        run = files.run_import(arrival=files.item_arrival(data=document(external_id=f"e{n}")))
        Run.objects.filter(pk=run.pk).update(experiment=experiment)
    url = reverse("tracer:experiment-export", args=[experiment.pk])
    assert url in page(admin_client.get(reverse("tracer:experiment", args=[experiment.pk]))).hrefs
    response = admin_client.get(url)
    assert response["Content-Disposition"] == f'attachment; filename="experiment-{experiment.pk}.jsonl"'
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line)["run"]["external_id"] for line in lines] == ["e0", "e1"]


def test_downloads_need_a_login(client):
    a, _ = imported_pair()
    assert client.get(reverse("tracer:run-export", args=[a.pk])).status_code == 302


# --- manage.py import_traces ------------------------------------------------------------------


def test_import_traces_imports_files_with_a_progress_bar_and_labels(tmp_path, django_user_model):
    user = django_user_model.objects.create_user("ada")
    batch = tmp_path / "batch.jsonl"
    batch.write_bytes(jsonl(document(), document()))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(starter_transcript()))
    out = StringIO()
    call_command(
        "import_traces", str(batch), str(chat), "--scenario", "refund-too-old", "--policy", "p", "--user", "ada",
        stdout=out, stderr=StringIO(),
    )  # fmt: skip
    text = out.getvalue()
    assert "[##############################] 2/2 documents of batch.jsonl: 2 imported, 0 refused" in text
    assert "3 documents imported" in text
    assert Run.objects.filter(owner=user, scenario="refund-too-old", policy_name="p").count() == 3


def test_import_traces_reports_each_refused_line_with_its_path_and_fails(tmp_path):
    bad = document()
    bad["steps"][0]["attempts"][0]["category"] = "x"
    batch = tmp_path / "batch.jsonl"
    batch.write_bytes(jsonl(document(), bad))
    err = StringIO()
    with pytest.raises(CommandError, match="2 of 3 documents refused"):
        call_command("import_traces", str(batch), str(tmp_path / "missing.json"), stdout=StringIO(), stderr=err)
    assert "line 2: steps[0].attempts[0].category: expected one of validation" in err.getvalue()
    assert "the file: cannot read: No such file or directory" in err.getvalue()
    assert Run.objects.count() == 1


def test_import_traces_refuses_an_unknown_user():
    with pytest.raises(CommandError, match="--user: no user named 'nobody'"):
        call_command("import_traces", "x.json", "--user", "nobody", stdout=StringIO())


def test_an_open_imported_run_polls_for_steps_its_sender_adds(admin_client):
    run = live.imported_run_open(user=None, source=Run.Source.API, run=schema.RunMeta(scenario="lookup-flaky"))
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert "new steps appear as their sender sends them" in doc.one(".live").text
    assert doc.pollers
    live.imported_steps_append(run=run, steps=[schema.StepIn(kind="final_answer", text="Found it.")])
    live.imported_run_close(run=run, end=schema.RunEndIn())
    fragment = page(admin_client.get(reverse("tracer:run-steps", args=[run.pk]), {"after": 0}, headers=HTMX))
    assert "Found it." in fragment.text and not fragment.pollers
