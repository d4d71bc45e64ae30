"""Read a page as a person and a browser do: its elements by CSS selector, their visible text.

Tests assert on what a page says and on selectors that mean something (``#step-2``, ``.attempt.fail``,
``[hx-trigger]``), never on exact markup strings, so a template can be re-indented, its attributes
reordered or its tags changed without breaking a test that checks behaviour. Standard library only
(``html.parser``); selectors are a small subset of CSS:

- a compound of ``tag``, ``#id``, ``.class`` (any number), ``[attr]``, ``[attr=value]``,
  ``[attr~=word]``, ``[attr^=prefix]``, ``[attr*=part]`` (values quoted or not), or ``*``;
- compounds joined by a space (descendant) or ``>`` (child); several selectors joined by ``,``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
INVISIBLE = {"script", "style", "template"}
# Elements that flow inside a line; the text of any other element is set apart from its neighbours,
# as a browser lays it out on lines of its own or in cells.
INLINE = {"a", "abbr", "b", "code", "em", "i", "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strong"}
INLINE |= {"sub", "sup", "time", "u", "var"}


@dataclass(eq=False)
class Node:
    """An element (``tag`` empty for the document itself) and what is inside it."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    def __repr__(self) -> str:
        shown = " ".join(f'{k}="{v}"' for k, v in self.attrs.items())
        return f"<{self.tag or '#document'}{' ' + shown if shown else ''}>"

    def __getitem__(self, name: str) -> str:
        return self.attrs[name]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.attrs.get(name, default)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def elements(self) -> list[Node]:
        """The child elements, without the text between them."""
        return [c for c in self.children if isinstance(c, Node)]

    @property
    def text(self) -> str:
        """The text a person reads in this element: entities decoded, whitespace collapsed."""
        return re.sub(r"\s+", " ", "".join(self._text_parts())).strip()

    def _text_parts(self) -> list[str]:
        parts: list[str] = []
        for child in self.children:
            if isinstance(child, str):
                parts.append(child)
            elif child.tag in INLINE:
                parts.extend(child._text_parts())
            elif child.tag not in INVISIBLE:
                parts.extend([" ", *child._text_parts(), " "])
        return parts

    def descendants(self):
        for child in self.elements:
            yield child
            yield from child.descendants()

    def select(self, selector: str) -> list[Node]:
        """The elements below this one that match ``selector``, in document order."""
        groups = [_parse_selector(part) for part in selector.split(",")]
        return [node for node in self.descendants() if any(_matches(node, chain) for chain in groups)]

    def one(self, selector: str) -> Node:
        """The only element matching ``selector``; fails naming the selector when there are none or more."""
        found = self.select(selector)
        assert len(found) == 1, f"{len(found)} elements match {selector!r}, not 1: {found[:5]}"
        return found[0]

    def texts(self, selector: str) -> list[str]:
        """The text of each element matching ``selector``."""
        return [node.text for node in self.select(selector)]

    @property
    def links(self) -> list[tuple[str, str]]:
        """``(text, href)`` of each link below this element: what a person reads and where it goes."""
        return [(a.text, a["href"]) for a in self.select("a[href]")]

    @property
    def hrefs(self) -> list[str]:
        return [href for _, href in self.links]

    @property
    def pollers(self) -> list[Node]:
        """The elements (this one included) that ask the server again on a timer: htmx ``every …``."""
        return [n for n in [self, *self.descendants()] if n.get("hx-trigger", "").startswith("every ")]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node(tag="")
        self.open = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag=tag, attrs={k: v if v is not None else "" for k, v in attrs}, parent=self.open[-1])
        self.open[-1].children.append(node)
        if tag not in VOID:
            self.open.append(node)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.open.pop()

    def handle_endtag(self, tag):
        # Close up to the matching open element; a stray end tag closes nothing.
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data):
        self.open[-1].children.append(data)


def parse(html: str | bytes) -> Node:
    """The document (or fragment) ``html`` as a tree of ``Node``s."""
    builder = _TreeBuilder()
    builder.feed(html.decode() if isinstance(html, bytes) else html)
    builder.close()
    return builder.root


def page(response) -> Node:
    """The parsed body of a Django test client response."""
    return parse(response.content)


# --- selectors -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<tag>\*|[a-zA-Z][\w-]*)
    | \#(?P<id>[\w-]+)
    | \.(?P<cls>[\w-]+)
    | \[\s*(?P<attr>[\w:-]+)\s*(?:(?P<op>[~^*]?=)\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\]\s]+))\s*)?\]
    """,
    re.VERBOSE,
)


@dataclass
class _Compound:
    tag: str = "*"
    checks: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (attr, op, value)
    combinator: str = " "  # how it joins the compound before it: " " descendant, ">" child


def _parse_selector(selector: str) -> list[_Compound]:
    chain: list[_Compound] = []
    spaced = re.sub(r"\s*>\s*", " > ", selector.strip())
    combinator = " "
    for word in _split_outside_brackets(spaced):
        if word == ">":
            combinator = ">"
            continue
        compound = _Compound(combinator=combinator)
        position = 0
        while position < len(word):
            match = _TOKEN.match(word, position)
            if not match:
                raise ValueError(f"unsupported selector {selector!r} at {word[position:]!r}")
            if match["tag"]:
                compound.tag = match["tag"].lower()
            elif match["id"]:
                compound.checks.append(("id", "=", match["id"]))
            elif match["cls"]:
                compound.checks.append(("class", "~=", match["cls"]))
            else:
                value = next((v for v in (match["dq"], match["sq"], match["bare"]) if v is not None), None)
                compound.checks.append((match["attr"].lower(), match["op"], value))
            position = match.end()
        chain.append(compound)
        combinator = " "
    if not chain:
        raise ValueError(f"empty selector {selector!r}")
    return chain


def _split_outside_brackets(text: str) -> list[str]:
    words, current, depth, quote = [], "", 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'" and depth:
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char.isspace() and not depth:
            if current:
                words.append(current)
            current = ""
            continue
        current += char
    if current:
        words.append(current)
    return words


def _matches_compound(node: Node, compound: _Compound) -> bool:
    if compound.tag != "*" and node.tag != compound.tag:
        return False
    for attr, op, value in compound.checks:
        if attr not in node.attrs:
            return False
        actual = node.attrs[attr]
        if op is None:
            continue
        if op == "=" and actual != value:
            return False
        if op == "~=" and value not in actual.split():
            return False
        if op == "^=" and not actual.startswith(value or ""):
            return False
        if op == "*=" and (value or "") not in actual:
            return False
    return True


def _matches(node: Node, chain: list[_Compound]) -> bool:
    """Whether ``node`` matches the last compound and its ancestors the ones before, right to left."""
    if not _matches_compound(node, chain[-1]):
        return False
    if len(chain) == 1:
        return True
    rest, combinator = chain[:-1], chain[-1].combinator
    ancestor = node.parent
    while ancestor is not None and ancestor.tag:
        if _matches(ancestor, rest):
            return True
        if combinator == ">":
            return False
        ancestor = ancestor.parent
    return False
