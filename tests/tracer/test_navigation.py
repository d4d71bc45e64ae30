"""What every page shares: the navigation (Compare in it), the skip link, one wording per term, and responses
that vary on the htmx headers wherever a page and its fragments share a URL (so Back never shows a
fragment the browser cached as the page)."""

import pytest
from django.urls import reverse
from django.utils.cache import has_vary_header

from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter

pytestmark = pytest.mark.django_db


def fragment_urls() -> list[tuple[str, str]]:
    """Every URL whose page also answers htmx with a fragment, and the fragment's target."""
    run = RunFactory(status="running", stop_reason="", verdict="")
    experiment = ExperimentFactory(total_runs=1)
    return [
        (reverse("tracer:runs"), "run-table"),
        (reverse("tracer:runs"), "run-rows"),
        (reverse("tracer:run-steps", args=[run.pk]), "step-poll"),
        (reverse("tracer:policies"), "policy-matrix"),
        (reverse("tracer:policy-variants"), "policy-list"),
        (reverse("tracer:policy-create"), "policy-form"),
        (reverse("tracer:stops"), "stop-counts"),
        (reverse("tracer:experiment", args=[experiment.pk]), "experiment-progress"),
        (reverse("tracer:tokens"), "token-list"),
        (reverse("tracer:import"), "import-report"),
    ]


def test_a_page_and_its_fragments_vary_on_the_htmx_headers(admin_client):
    for url, target in fragment_urls():
        fragment = admin_client.get(url, headers={"HX-Request": "true", "HX-Target": target})
        assert fragment.status_code == 200, url
        assert b"<html" not in fragment.content, f"{url} answered htmx with the whole page"
        for response in (fragment, admin_client.get(url)):
            assert has_vary_header(response, "HX-Request"), url
            assert has_vary_header(response, "HX-Target"), url


def test_a_history_restore_gets_the_whole_page(admin_client):
    """htmx asks for a page it no longer has (Back after a filter) with HX-History-Restore-Request and,
    as base.html configures it, without HX-Request: the answer is the page, not the fragment."""
    response = admin_client.get(
        reverse("tracer:runs"), {"verdict": "fail"}, headers={"HX-History-Restore-Request": "true"}
    )
    doc = page(response)
    assert doc.select("nav[aria-label=Main]") and doc.select("form.filters")
    config = doc.one("meta[name=htmx-config]")["content"]
    assert '"historyRestoreAsHxRequest": false' in config and '"historyCacheSize": 0' in config


def test_the_navigation_offers_compare_and_marks_the_current_page(admin_client):
    doc = page(admin_client.get(reverse("tracer:compare")))
    nav = doc.one("nav[aria-label=Main]")
    assert ("Compare", reverse("tracer:compare")) in nav.links
    assert [a.text for a in nav.select("a[aria-current=page]")] == ["Compare"]


def test_the_skip_link_is_first_and_leads_to_the_content(admin_client):
    doc = page(admin_client.get(reverse("tracer:runs")))
    first = doc.one("body").select("a")[0]
    assert first.text == "Skip to the content" and first["href"] == "#main"
    assert doc.select("main#main")


def test_a_stop_reason_reads_the_same_on_every_page(admin_client):
    answered = refund_too_old_starter()
    stopped = guard_stop()
    texts = {
        "runs list": page(admin_client.get(reverse("tracer:runs"))).text,
        "run page": page(admin_client.get(reverse("tracer:run", args=[answered.pk]))).text,
        "compare": page(admin_client.get(reverse("tracer:compare"), {"a": answered.pk, "b": stopped.pk})).text,
        "stop queue": page(admin_client.get(reverse("tracer:stops"))).text,
    }
    for where, text in texts.items():
        assert "final_answer" not in text and "Final Answer" not in text, where
        assert "consecutive_errors" not in text and "Consecutive Errors" not in text, where
    assert "Stopped: Final answer" in texts["run page"]
    assert "Final answer" in texts["runs list"] and "Consecutive errors" in texts["runs list"]
    assert "Final answer" in texts["compare"] and "Consecutive errors" in texts["compare"]
    assert "Consecutive errors" in texts["stop queue"]
