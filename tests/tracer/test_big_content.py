"""Big values from a trace: a step holding megabytes (the step API takes up to RLT_API_MAX_BYTES) shows
its first PREVIEW_CHARS characters on every page, with a "show all (N KB)" control whose endpoint
answers the whole value, escaped, to a login only; a step, run or field there is none of is a 404."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client

from tests.tracer.test_api import Api, may_add_runs
from tracer.previews import PREVIEW_CHARS
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
HOSTILE = "<script>alert('from a trace')</script>&amp;\"quoted\" "
PAGE_LIMIT = 200_000
SHOW_ALL = re.compile(r'<a class="show-all" href="([^"]+)" hx-get="\1"[^>]*>show all \(([\d,]+) KB\)</a>')


def big(size: int, letter: str) -> str:
    """A text of ``size`` characters that starts hostile and ends with a marker, so a cut one is told apart."""
    return HOSTILE + letter * (size - len(HOSTILE) - 4) + "#END"


@pytest.fixture
def alice(django_user_model):
    return may_add_runs(django_user_model.objects.create_user("alice"))


@pytest.fixture
def api(alice):
    return Api(token_create(user=alice, name="big agent")[1])


@pytest.fixture
def browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def send(api: Api, run_id: int, step: dict) -> None:
    response = api.post(f"/runs/{run_id}/steps", {"steps": [step]})
    assert response.status_code == 200, response.content[:500]


def open_run(api: Api, **fields) -> int:
    response = api.post("/runs", {"scenario": "refund-too-old", "policy": "structured"} | fields)
    assert response.status_code == 201, response.content[:500]
    return response.json()["id"]


@pytest.fixture
def texts() -> dict[str, str]:
    return {
        "said": big(7 * MiB, "s"),
        "input": big(2 * MiB, "i"),
        "message": big(2 * MiB, "m"),
        "content": big(2 * MiB, "c"),
        "result": big(2 * MiB, "r"),
        "answer": big(3 * MiB, "a"),
        "error": big(2 * MiB, "e"),
    }


@pytest.fixture
def big_run(api, texts) -> int:
    """A run sent through the step API, a request per step: a 7 MiB assistant text beside a call, a failed
    attempt's 2 MiB input and message, an ok attempt's 2 MiB content, a 2 MiB tool_result, a 3 MiB final
    answer and a 2 MiB error at its end."""
    run_id = open_run(api)
    send(
        api,
        run_id,
        {"kind": "tool_use", "tool_name": "lookup_order", "input": {"order_id": "0871"}, "text": texts["said"]},
    )
    failed = {"number": 1, "ok": False, "category": "transient", "retryable": True, "message": texts["message"]}
    send(
        api,
        run_id,
        {"kind": "tool_use", "tool_name": "lookup_order", "input": {"q": texts["input"]}, "attempts": [failed]},
    )
    ok = {"number": 1, "ok": True, "content": texts["content"], "result_content": "short"}
    send(api, run_id, {"kind": "tool_use", "tool_name": "lookup_order", "attempts": [ok]})
    send(api, run_id, {"kind": "tool_use", "tool_name": "lookup_order", "result_content": texts["result"]})
    send(api, run_id, {"kind": "final_answer", "text": texts["answer"]})
    response = api.post(f"/runs/{run_id}/finish", {"error": texts["error"]})
    assert response.status_code == 200, response.content[:500]
    return run_id


def show_all_links(page: str) -> dict[str, int]:
    return {html.unescape(url): int(kb.replace(",", "")) for url, kb in SHOW_ALL.findall(page)}


def test_a_run_with_a_7_mib_step_has_a_small_page_with_a_show_all_control_for_each_big_value(browser, big_run, texts):
    response = browser.get(f"/runs/{big_run}/")
    assert response.status_code == 200
    assert len(response.content) < PAGE_LIMIT
    page = response.content.decode()
    links = show_all_links(page)
    base = f"/runs/{big_run}/"
    assert links == {
        f"{base}steps/1/text/": 7 * 1024,
        f"{base}steps/2/input/": 2 * 1024 + 1,  # its JSON: {"q": "…"}
        f"{base}steps/2/attempt-1-message/": 2 * 1024,
        f"{base}steps/3/attempt-1-content/": 2 * 1024,
        f"{base}steps/4/result/": 2 * 1024,
        f"{base}steps/4/attempt-1-content/": 2 * 1024,  # the attempt made of the step's own fields
        f"{base}steps/5/text/": 3 * 1024,
        f"{base}value/final_answer/": 3 * 1024,
        f"{base}value/error/": 2 * 1024,
    }
    assert "#END" not in page  # no value shown whole
    assert "<script>alert" not in page
    assert html.escape(HOSTILE) in page
    assert html.escape(texts["said"][:PREVIEW_CHARS]) in page  # the first PREVIEW_CHARS characters, escaped


def test_show_all_answers_the_whole_value_escaped_in_the_previews_place(browser, big_run, texts):
    page = browser.get(f"/runs/{big_run}/").content.decode()
    links = show_all_links(page)
    wanted = {
        "steps/1/text/": texts["said"],
        "steps/2/attempt-1-message/": texts["message"],
        "steps/3/attempt-1-content/": texts["content"],
        "steps/4/result/": texts["result"],
        "value/error/": texts["error"],
    }
    for path, text in wanted.items():
        url = f"/runs/{big_run}/{path}"
        assert url in links
        response = browser.get(url, headers={"HX-Request": "true"})
        assert response.status_code == 200
        body = response.content.decode()
        assert body == f'<span class="clipped whole">{html.escape(text)}</span>'
    answer = browser.get(f"/runs/{big_run}/steps/5/text/", headers={"HX-Request": "true"}).content.decode()
    assert "<script>" not in answer and answer.endswith("#END</span>") and len(answer) > 3 * MiB
    given = browser.get(f"/runs/{big_run}/steps/2/input/", headers={"HX-Request": "true"}).content.decode()
    as_sent = json.dumps({"q": texts["input"]}, ensure_ascii=False)
    assert given == f'<span class="clipped whole">{html.escape(as_sent)}</span>'


def test_show_all_without_htmx_is_a_page_of_its_own(browser, big_run, texts):
    response = browser.get(f"/runs/{big_run}/value/error/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "<html" in page and f'href="/runs/{big_run}/"' in page
    assert html.escape(texts["error"]) in page
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_show_all_needs_a_login(big_run):
    response = Client().get(f"/runs/{big_run}/steps/1/text/")
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize(
    "path",
    [
        "steps/99/text/",  # no such step
        "steps/1/secret/",  # no such field
        "steps/1/attempt-2-message/",  # no such attempt
        "steps/1/attempt-0-message/",
        "steps/1/attempt-1-message/",  # the attempt made of an ok step's fields has no message
        "steps/3/attempt-1-nothing/",
        "steps/3/model-attempt-1-error/",  # no model call recorded
        "steps/99999999999999999999999/text/",  # beyond any id
        "value/search_text/",  # not one a page shows
        "value/model-attempt-1-error/",
        "value/attempt-x-message/",
    ],
)
def test_show_all_of_what_a_run_does_not_show_is_a_404(browser, big_run, path):
    assert browser.get(f"/runs/{big_run}/{path}", headers={"HX-Request": "true"}).status_code == 404


def test_show_all_of_a_run_that_does_not_exist_is_a_404(browser):
    assert browser.get("/runs/424242/steps/1/text/").status_code == 404
    assert browser.get("/runs/424242/value/final_answer/").status_code == 404
    assert browser.get("/runs/99999999999999999999999/value/final_answer/").status_code == 404


def test_short_values_are_shown_whole_without_a_control(browser, api):
    run_id = open_run(api)
    send(api, run_id, {"kind": "final_answer", "text": "x" * PREVIEW_CHARS})
    api.post(f"/runs/{run_id}/finish", {})
    page = browser.get(f"/runs/{run_id}/").content.decode()
    assert "x" * PREVIEW_CHARS in page
    assert "show all" not in page


def test_a_value_one_character_over_the_preview_is_cut_and_says_its_size(browser, api):
    run_id = open_run(api)
    send(api, run_id, {"kind": "final_answer", "text": "é" * (PREVIEW_CHARS + 1)})
    page = browser.get(f"/runs/{run_id}/").content.decode()
    assert "é" * PREVIEW_CHARS + '<span class="clip-more">' in page
    assert show_all_links(page) == {f"/runs/{run_id}/steps/1/text/": 9}  # 8,194 bytes of UTF-8


def test_the_compare_page_of_two_big_runs_is_small(browser, api, big_run, texts):
    other = open_run(api, policy="starter")
    send(api, other, {"kind": "final_answer", "text": big(3 * MiB, "b")})
    api.post(f"/runs/{other}/finish", {})
    response = browser.get(f"/compare/?a={big_run}&b={other}")
    assert response.status_code == 200
    assert len(response.content) < PAGE_LIMIT
    page = response.content.decode()
    assert "#END" not in page and "<script>alert" not in page
    links = show_all_links(page)
    assert f"/runs/{big_run}/steps/2/input/" in links
    assert f"/runs/{big_run}/steps/2/attempt-1-message/" in links
    assert f"/runs/{other}/steps/1/text/" in links
    assert f"/runs/{other}/value/final_answer/" in links  # the differences' final answer


def test_the_stop_queue_of_a_big_guard_stop_is_small(browser, api, texts):
    run_id = open_run(api)
    failed = {"number": 1, "ok": False, "category": "business", "retryable": False, "message": texts["message"]}
    for _ in range(3):
        send(
            api, run_id, {"kind": "tool_use", "tool_name": "lookup_order", "input": {"q": "0871"}, "attempts": [failed]}
        )
    end = {"stop_reason": "consecutive_errors", "guard": "3 tool errors in a row"}
    assert api.post(f"/runs/{run_id}/finish", end).status_code == 200
    response = browser.get("/stops/")
    assert response.status_code == 200
    assert len(response.content) < PAGE_LIMIT
    page = response.content.decode()
    assert f"Run #{run_id}" in page and "#END" not in page and "<script>alert" not in page
    assert f"/runs/{run_id}/steps/1/attempt-1-message/" in show_all_links(page)
