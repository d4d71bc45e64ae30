"""A JSON value as a collapsible tree of ``<details>`` (the run page's raw transcript): objects and
arrays fold, their first levels open; every key and value escaped. Bounded whatever the value holds:
a string shows its first ``STRING_CHARS`` characters, a container its first ``ITEMS`` entries, and
the whole tree at most ``NODES`` nodes and ``TEXT_CHARS`` characters of strings, so the run page stays
small; each cut says how much was left out (the run's download has it all)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from django.utils.safestring import SafeString, mark_safe

STRING_CHARS = 2000
ITEMS = 200
NODES = 600
TEXT_CHARS = 30_000
OPEN_DEPTH = 1  # the root and its children show open; deeper containers start folded


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


class _Tree:
    def __init__(self) -> None:
        self.nodes = 0
        self.text_left = TEXT_CHARS
        self.parts: list[str] = []

    def scalar(self, value: Any) -> None:
        if value is None or isinstance(value, bool):
            self.parts.append(f'<span class="j-lit">{json.dumps(value)}</span>')
        elif isinstance(value, int | float):
            self.parts.append(f'<span class="j-num">{escape(json.dumps(value))}</span>')
        else:
            text = value if isinstance(value, str) else str(value)
            take = min(STRING_CHARS, self.text_left)
            self.text_left -= take
            shown = json.dumps(text[:take], ensure_ascii=False)
            self.parts.append(f'<span class="j-str">{escape(shown)}</span>')
            if len(text) > take:
                more = _count(len(text) - take, "more character")
                self.parts.append(f' <span class="j-cut">… {more}</span>')

    def value(self, value: Any, depth: int) -> None:
        self.nodes += 1
        if isinstance(value, dict):
            self.container(list(value.items()), depth, "{", "}", _count(len(value), "key"), keyed=True)
        elif isinstance(value, list | tuple):
            self.container(list(enumerate(value)), depth, "[", "]", _count(len(value), "item"), keyed=False)
        else:
            self.scalar(value)

    def container(self, items: list, depth: int, start: str, end: str, size: str, *, keyed: bool) -> None:
        if not items:
            self.parts.append(f'<span class="j-lit">{start}{end}</span>')
            return
        opened = " open" if depth <= OPEN_DEPTH else ""
        self.parts.append(
            f'<details class="j-node"{opened}><summary>{start} <span class="j-size">{size}</span> {end}</summary><ul>'
        )
        for shown, (key, item) in enumerate(items):
            if shown >= ITEMS or self.nodes >= NODES or self.text_left <= 0:
                left = _count(len(items) - shown, "more key" if keyed else "more item")
                self.parts.append(f'<li class="j-cut">… {left} not shown</li>')
                break
            label = escape(json.dumps(str(key), ensure_ascii=False)) if keyed else str(key)
            self.parts.append(f'<li><span class="{"j-key" if keyed else "j-index"}">{label}</span>: ')
            self.value(item, depth + 1)
            self.parts.append("</li>")
        self.parts.append("</ul></details>")


def json_tree(value: Any) -> SafeString:
    """``value`` as the tree's HTML: every key and string through ``escape``, the rest numbers,
    literals and this module's markup."""
    tree = _Tree()
    tree.value(value, 0)
    return mark_safe(f'<div class="json-tree">{"".join(tree.parts)}</div>')  # escaped above
