"""A long compare is windowed as a run's timeline is: the first screen shows the head, the
split with its cause and the rows around it; each gap loads its next rows as an htmx fragment, and a
link to an aligned step far down still reaches it. Split, cause, folds and the summary are found over
every step. Pages are read as a person reads them (``tests.dom``)."""

import pytest
from django.urls import reverse

from tests.dom import parse
from tests.factories import RunFactory, failed_attempt, lookup_failure, steps_add, tool_step
from tracer.models import Run

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
SCRIPT = "<script>alert('x')</script>"


def parted(steps: int = 500, split_at: int = 300) -> tuple[Run, Run]:
    """A starter and a structured run of ``steps`` failing lookups, the same calls up to ``split_at``,
    where they look up different customers. Each call is another customer, and the two policies report
    its failure differently, so no row folds."""
    runs = []
    for policy, who in (("starter", "a"), ("structured", "b")):
        run = RunFactory(
            scenario="lookup-flaky-exhausted",
            policy_name=policy,
            step_count=steps,
            tool_call_count=steps,
            error_count=steps,
            retry_count=7 if policy == "starter" else 3,
        )
        same = [lookup_failure(i) for i in range(1, split_at)]
        steps_add(run, [*same, *(lookup_failure(i, customer=f"{who}{i}") for i in range(split_at, steps + 1))])
        runs.append(run)
    return runs[0], runs[1]


def compare_url(a: Run, b: Run, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"a": a.pk, "b": b.pk, **params}.items())
    return f"{reverse('tracer:compare')}?{query}"


def shown_rows(doc) -> list[int]:
    return [int(pair["id"].removeprefix("row-")) for pair in doc.select(".pair")]


def gap_fill(client, gap, **params) -> object:
    """What the gap's control gets, asked as htmx asks it (its target: the gap)."""
    url = gap.one("a[hx-get]")["hx-get"] + "".join(f"&{k}={v}" for k, v in params.items())
    response = client.get(url, headers={**HTMX, "HX-Target": gap["id"]})
    assert response.status_code == 200
    return parse(response.content.decode())


def test_two_500_step_runs_show_the_split_and_its_cause_on_the_first_screen(admin_client):
    a, b = parted()
    doc = parse(admin_client.get(compare_url(a, b)).content.decode())

    summary = doc.one(".split-summary").text
    assert "The runs split at aligned step 300." in summary
    assert 'Cause: attempt 1 of lookup_orders came back as bare "Error" in run A' in summary
    assert doc.one(".split-summary a[href='#row-299']").text == "aligned step 299"
    split = doc.one(".pair.is-split")
    assert split["id"] == "row-300" and "This is where the runs split" in split.text
    assert doc.one(".pair.has-cause")["id"] == "row-299"
    assert shown_rows(doc) == [*range(1, 11), *range(290, 311)]  # the head, and the split with its neighbours
    gaps = doc.select(".aligned .row-gap")
    assert [g.one("a").text for g in gaps] == ["Show aligned steps 11–60", "Show aligned steps 311–360"]
    assert "279 aligned steps not shown yet (11–289): all differ between the runs" in gaps[0].text
    assert "190 aligned steps not shown yet (311–500)" in gaps[1].text
    # without JavaScript the control opens the page at its first step
    assert gaps[1].one("a")["href"] == compare_url(a, b, at=311) + "#row-311"


def test_both_runs_counters_are_over_all_their_steps(admin_client):
    a, b = parted()
    doc = parse(admin_client.get(compare_url(a, b)).content.decode())
    table = {row.one("th").text: [td.text for td in row.select("td")] for row in doc.select("table.diffs tbody tr")}
    assert table["Tool calls"] == ["500", "500"]
    assert table["Failed steps"] == ["500", "500"]
    assert table["Retries"] == ["7", "3"]


def test_a_gap_loads_its_next_50_rows_and_a_gap_for_the_rest(admin_client):
    a, b = parted()
    doc = parse(admin_client.get(compare_url(a, b)).content.decode())
    after_split = doc.select(".aligned .row-gap")[1]

    more = gap_fill(admin_client, after_split)

    assert shown_rows(more) == list(range(311, 361))
    assert more.select(".split-summary, table.diffs, select") == []  # only the rows
    [rest] = more.select(".row-gap")
    assert "Show aligned steps 361–410" in rest.text
    assert "140 aligned steps not shown yet (361–500)" in rest.text
    assert '{"customer": "b360"}' in more.one("#row-360").text
    last = gap_fill(admin_client, rest, at=480)
    assert shown_rows(last) == list(range(461, 501))
    assert "Show aligned steps 361–410" in last.one(".row-gap").text  # the rows before stay a gap


def test_a_link_to_a_far_aligned_step_opens_the_page_at_it(admin_client):
    a, b = parted()
    doc = parse(admin_client.get(compare_url(a, b, at=480)).content.decode())
    assert '{"customer": "b480"}' in doc.one("#row-480").text
    assert set(range(451, 501)) <= set(shown_rows(doc))
    assert doc.one(".pair.is-split")["id"] == "row-300"  # the split stays on the screen
    assert [g["id"] for g in doc.select(".row-gap")] == ["row-gap-11", "row-gap-311"]


def test_a_5000_step_compares_first_screen_is_no_bigger_than_a_50_step_ones(admin_client):
    small, big = parted(steps=50, split_at=30), parted(steps=5000, split_at=3000)
    small_page = admin_client.get(compare_url(*small))
    big_page = admin_client.get(compare_url(*big))
    assert len(shown_rows(parse(small_page.content.decode()))) == 50  # a short compare is shown whole
    assert len(shown_rows(parse(big_page.content.decode()))) <= 50
    assert len(big_page.content) < 1.2 * len(small_page.content)


def test_a_fold_of_many_rows_loads_them_when_opened(admin_client):
    long = RunFactory(scenario="stuck-model", policy_name="unguarded", stop_reason=Run.StopReason.MAX_STEPS)
    short = RunFactory(scenario="stuck-model", stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)

    def stuck(i: int):
        return tool_step(i, [failed_attempt(1, category="validation", message="bad date")], tool="free_slots")

    steps_add(long, [stuck(i) for i in range(1, 201)])
    steps_add(short, [stuck(i) for i in range(1, 4)])
    doc = parse(admin_client.get(compare_url(long, short)).content.decode())
    fold = doc.select("details.stretch")[-1]
    assert (
        fold.one("summary").text == "196 more identical failing calls of free_slots in run A; run B has no such steps"
    )
    assert fold.select(".pair") == [] and "open" not in fold.attrs
    gap = fold.one(".row-gap")
    assert "Show aligned steps 5–54" in gap.text

    rows = gap_fill(admin_client, gap)

    assert shown_rows(rows) == list(range(5, 55))  # unfolded, not folded again
    assert rows.select("details") == []
    assert "Show aligned steps 55–104" in rows.one(".row-gap").text
    # a link to a row inside the fold opens it there
    at = parse(admin_client.get(compare_url(long, short, at=150)).content.decode())
    opened = at.one("details.stretch[open]")
    assert "free_slots" in opened.one("#row-150").text


def test_a_gaps_rows_escape_what_the_trace_says(admin_client):
    a, b = parted(steps=120, split_at=100)
    hostile = [
        tool_step(i, [failed_attempt(1, category="validation", message=SCRIPT)], tool=SCRIPT, input={"d": SCRIPT})
        for i in range(121, 131)
    ]
    steps_add(a, hostile)
    steps_add(b, hostile)
    doc = parse(admin_client.get(compare_url(a, b)).content.decode())
    gap = doc.select(".row-gap")[-1]

    response = admin_client.get(gap.one("a[hx-get]")["hx-get"] + "&at=125", headers={**HTMX, "HX-Target": gap["id"]})

    body = response.content.decode()
    assert SCRIPT not in body
    assert SCRIPT in parse(body).one("#row-125").text


def test_a_gap_of_nonsense_bounds_answers_rows_all_the_same(admin_client):
    a, b = parted(steps=120, split_at=100)
    url = compare_url(a, b, after="x", before="-3", at="y", plain="maybe")
    response = admin_client.get(url, headers={**HTMX, "HX-Target": "row-gap-1"})
    assert response.status_code == 200
    assert shown_rows(parse(response.content.decode())) == list(range(1, 51))
