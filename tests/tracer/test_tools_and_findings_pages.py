"""The Tools and Findings pages: every tool and every kind over the runs in scope, from the stored diagnosis."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dom import page
from tests.factories import ExperimentFactory
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import Finding, PolicyVariant

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
LIST = HTMX | {"HX-Target": "finding-list"}


def execute(scenario: str, policy: str):
    return run_execute(run_id=run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy)).pk)


def tool_card(doc, tool: str):
    (card,) = [c for c in doc.select("section.tool-card") if c.get("data-tool") == tool]
    return card


def test_the_tools_page_shows_a_tools_calls_failures_by_category_retries_and_wasted_tries(admin_client):
    starter = execute("refund-too-old", "starter")
    execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:tools")))
    card = tool_card(doc, "process_refund")
    figures = dict(zip(card.texts("dl.figures dt"), card.texts("dl.figures dd"), strict=True))
    assert figures["Calls"] == "2 in 2 runs" and figures["Failed"] == "2 (100.0 %)"
    assert figures["Harness retries"] == "2" and figures["Wasted tries"] == "2"
    assert card.texts(".categories .cat") == ["business 2 (100.0 %)"]
    assert "2 of 2 calls failed (business 2)" in card.one("svg.day-chart").text
    # its findings link to the Findings page narrowed to this tool, and its message lint is worst first
    assert card.texts(".tool-findings .badge") == ["retried-refusal", "vague-error"]
    rows = card.select("table.lint tbody tr")
    assert rows[0].one("code.template").text == "Error" and "no no no yes" in rows[0].text
    assert "Refunds close after 30 days" in rows[0].one("code.rewrite").text
    assert rows[0].one("a")["href"] == reverse("tracer:run", args=[starter.pk]) + "#step-1"
    assert rows[1].one("code.template").text == "Refunds close after <n> days. This order is <n> days old."
    (advice,) = card.select(".advice-item")
    assert "retry_on: transient" in advice.text and "sure" in advice.text


def test_the_tools_page_narrows_to_the_runs_lists_filters(admin_client):
    execute("refund-too-old", "starter")
    execute("lookup-empty", "structured")
    shown = page(admin_client.get(reverse("tracer:tools"), {"policy": "structured"}))
    assert [c["data-tool"] for c in shown.select("section.tool-card")] == ["lookup_orders"]
    one = page(
        admin_client.get(reverse("tracer:tools"), {"tool": "process_refund"}, headers=HTMX | {"HX-Target": "tool-list"})
    )
    assert [c["data-tool"] for c in one.select("section.tool-card")] == ["process_refund"]
    assert not one.select("form#tool-filters")  # the fragment alone


@pytest.mark.parametrize(
    ("url", "query", "said"),
    [
        ("tracer:tools", {"tool": "no_such_tool"}, "unknown tool 'no_such_tool'; expected one of: process_refund"),
        ("tracer:findings", {"kind": "bogus"}, "unknown finding kind 'bogus'; expected one of: retried-refusal"),
        ("tracer:findings", {"tool": "nope"}, "unknown tool 'nope'; expected one of: process_refund"),
        ("tracer:findings", {"started_from": "yesterday"}, "Started from: expected a date as YYYY-MM-DD"),
        ("tracer:tools", {"policy": "<script>"}, "unknown policy '<script>'; expected one of: starter"),
    ],
)
def test_a_filter_that_names_nothing_known_is_a_400_saying_what_is_valid(admin_client, url, query, said):
    execute("refund-too-old", "starter")
    response = admin_client.get(reverse(url), query)
    assert response.status_code == 400
    assert said in " ".join(page(response).texts("p.error"))
    assert b"<script>" not in response.content


def test_the_findings_page_counts_each_kind_with_its_top_tools_and_lists_its_runs(admin_client):
    runs = [execute("refund-too-old", "starter") for _ in range(2)] + [execute("lookup-empty", "starter")]
    execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:findings")))
    row = doc.one("#kind-retried-refusal")
    assert row.texts("td.num")[:2] == ["2", "2"] and "process_refund 2" in row.text
    assert doc.one("#kind-empty-as-error").texts("td.num")[:2] == ["1", "1"]
    assert doc.one("#kind-internal-detail-leak").texts("td.num")[:2] == ["0", "0"]
    # the most found kind's runs are listed first; another kind's come as a fragment
    listed = [a["href"] for a in doc.select("#finding-list .finding-runs li > a")]
    assert listed == [reverse("tracer:run", args=[r.pk]) + "#step-1" for r in reversed(runs[:2])]
    other = page(admin_client.get(reverse("tracer:findings"), {"kind": "empty-as-error"}, headers=HTMX))
    assert [a.text for a in other.select(".finding-runs li > a")] == [f"run #{runs[2].pk}"]


def test_an_archived_experiments_runs_leave_both_pages_and_come_back_with_it(admin_client):
    trial = ExperimentFactory(name="old trial")
    archived = run_execute(
        run_id=run_create(
            scenario="refund-too-old", policy=PolicyVariant.objects.get(name="starter"), experiment=trial
        ).pk
    )
    kept = execute("refund-too-old", "starter")
    changelist = reverse("admin:tracer_experiment_changelist")

    def shown():
        tools = page(admin_client.get(reverse("tracer:tools")))
        card = tool_card(tools, "process_refund")
        calls = dict(zip(card.texts("dl.figures dt"), card.texts("dl.figures dd"), strict=True))
        findings = page(admin_client.get(reverse("tracer:findings")))
        runs = [a["href"] for a in findings.select("#finding-list .finding-runs li > a")]
        counts = findings.one("#kind-retried-refusal").texts("td.num")[:2]
        return calls["Calls"], counts, runs

    link = reverse("tracer:run", args=[kept.pk]) + "#step-1"
    both = [reverse("tracer:run", args=[archived.pk]) + "#step-1", link]
    assert shown() == ("2 in 2 runs", ["2", "2"], sorted(both, reverse=True))
    admin_client.post(changelist, {"action": "archive", "_selected_action": [trial.pk]})
    assert shown() == ("1 in 1 run", ["1", "1"], [link])
    assert Finding.objects.filter(run=archived).exists()  # its own page still shows its findings
    admin_client.post(changelist, {"action": "unarchive", "_selected_action": [trial.pk]})
    assert shown() == ("2 in 2 runs", ["2", "2"], sorted(both, reverse=True))


def test_patterns_group_failing_runs_by_signature_largest_first_with_their_share(admin_client):
    for _ in range(3):
        execute("refund-too-old", "starter")
    execute("refund-bad-id", "starter")
    execute("refund-too-old", "structured")  # explained once: a pass, not a failing run
    doc = page(admin_client.get(reverse("tracer:findings")))
    rows = doc.select("table.patterns tbody tr")
    assert [r.texts("td")[0] for r in rows] == ["3", "1"]
    assert "75.0 %" in rows[0].text and "process_refund" in rows[0].text and "business" in rows[0].text
    assert "4 failing runs" in doc.one("#patterns-head").text


def test_the_findings_page_pages_a_kinds_runs(admin_client, monkeypatch):
    from tracer.reads import findings_page

    monkeypatch.setattr(findings_page, "FINDINGS_PER_PAGE", 2)
    runs = [execute("refund-too-old", "starter") for _ in range(3)]
    first = page(admin_client.get(reverse("tracer:findings"), {"kind": "vague-error"}))
    assert len(first.select(".finding-runs li")) == 2 and "older" in first.one("#finding-list .pager").text
    second = page(admin_client.get(reverse("tracer:findings"), {"kind": "vague-error", "page": "2"}, headers=LIST))
    assert [a.text for a in second.select(".finding-runs li > a")] == [f"run #{runs[0].pk}"]


def test_text_from_a_trace_is_escaped_on_both_pages(admin_client):
    from tracer.intake import files

    document = {
        "format": "rlt.run/1",
        "run": {"model": "claude-haiku-4-5"},
        "steps": [
            {
                "kind": "tool_use",
                "tool_name": "<b>x</b>",
                "input": {"id": "1"},
                "attempts": [{"number": 1, "ok": False, "message": "<img src=x onerror=alert(1)>"}],
                "result_content": "<img src=x onerror=alert(1)>",
                "is_error": True,
            },
            {"kind": "final_answer", "text": "no"},
        ],
    }
    files.run_import(arrival=files.item_arrival(data=document))
    for url in ("tracer:tools", "tracer:findings"):
        html = admin_client.get(reverse(url)).content
        assert b"<img src=x" not in html and b"<b>x</b>" not in html


def test_both_pages_are_in_the_navigation(admin_client):
    doc = page(admin_client.get(reverse("tracer:runs")))
    hrefs = [a["href"] for a in doc.select("nav[aria-label=Main] a")]
    assert reverse("tracer:tools") in hrefs and reverse("tracer:findings") in hrefs
