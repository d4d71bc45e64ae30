"""The transcript tree's bounds: whatever a transcript holds, its HTML stays small and says what it left out."""

from __future__ import annotations

from tracer.json_tree import ITEMS, json_tree


def test_a_huge_transcript_makes_a_small_tree_that_says_what_it_left_out():
    transcript = [{"role": "user", "content": "y" * 100_000} for _ in range(500)]
    html = json_tree(transcript)
    assert len(html.encode()) < 100_000
    assert "… 98,000 more characters" in html
    assert f"… {500 - ITEMS:,} more items not shown" in html or "more items not shown" in html


def test_a_small_value_is_whole_and_escaped():
    html = json_tree({"note": "<b>hi</b>", "n": 3, "ok": True, "none": None, "empty": []})
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>" not in html
    assert '<span class="j-num">3</span>' in html and "true" in html and "null" in html
    assert "j-cut" not in html
