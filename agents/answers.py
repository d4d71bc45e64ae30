"""Reading an answer for the facts it states: numbers in digits or words, durations in any unit, and
claims with their negation. The judges (``agents.judges``) ask; this module only reads.

An answer is read once into a ``Reading``: lowercased, one kind of dash and quote, markdown emphasis
dropped, contractions spelled out ("couldn't" is "could not", "I've" is "I have"), number words as
digits ("two hundred thirty-nine" is "239", "thirty-day" is "30-day"), cut into sentences (a line, a
list item, a table row is one) and those into clauses (at commas, semicolons, "but", "because"…).
Every position in the read text maps back to the answer's own words, so a check can quote them.

A ``Claim`` is a statement an answer can make, in its many wordings ("a refund was made": "I've
refunded", "the refund has been issued", "is on its way"…), with the wordings of its opposite ("I
couldn't refund", "no refund was made"). Each time a wording appears, the claim is *stated*,
*denied* (a negation before it in its clause: "the refund has not been processed", "I never
refunded") or only *supposed* (a condition, a question, an offer or a promise: "if you send the
right number I'll refund it", "would you like me to refund order 0934?"), and only stated and denied
ones count. Importing this module loads only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

# --- the read text, mapped back to the answer's words --------------------------------------------


class _Tracked:
    """A string being rewritten, where each character remembers the span of the original it came from."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.src = [(i, i + 1) for i in range(len(text))]

    def sub(self, pattern: re.Pattern[str], repl) -> None:
        out: list[str] = []
        src: list[tuple[int, int]] = []
        last = 0
        for m in pattern.finditer(self.text):
            out.append(self.text[last : m.start()])
            src.extend(self.src[last : m.start()])
            new = repl(m) if callable(repl) else m.expand(repl)
            if m.end() > m.start():
                span = (self.src[m.start()][0], self.src[m.end() - 1][1])
            else:  # an insertion: it stands where the next character is
                at = self.src[m.start()][0] if m.start() < len(self.src) else (self.src[-1][1] if self.src else 0)
                span = (at, at)
            out.append(new)
            src.extend([span] * len(new))
            last = m.end()
        out.append(self.text[last:])
        src.extend(self.src[last:])
        self.text = "".join(out)
        self.src = src

    def replace(self, spans: list[tuple[int, int, str]]) -> None:
        """Replace each (start, end) of the current text, in order and not overlapping, by its new text."""
        out: list[str] = []
        src: list[tuple[int, int]] = []
        last = 0
        for start, end, new in spans:
            out.append(self.text[last:start])
            src.extend(self.src[last:start])
            out.append(new)
            src.extend([(self.src[start][0], self.src[end - 1][1])] * len(new))
            last = end
        out.append(self.text[last:])
        src.extend(self.src[last:])
        self.text = "".join(out)
        self.src = src

    def lower(self) -> None:
        if len(self.text.lower()) == len(self.text):
            self.text = self.text.lower()
        else:  # a character whose lowercase is longer (İ): each one rewritten on its own
            self.sub(re.compile(r"[^\W\d_]", re.S), lambda m: m.group().lower())


_CHARS = {
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": " - ",
    "\u2015": " - ",
    "\u2212": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u02bc": "'",
    "`": "",
    "\u201c": '"',
    "\u201d": '"',
    "\u00a0": " ",
    "\u202f": " ",
    "\u2009": " ",
    "\u2026": "...",
    "\u2248": " about ",  # ≈
    "~": " about ",
    "\u2022": "\n- ",  # •
}
_CHAR = re.compile("|".join(re.escape(c) for c in _CHARS))
_MARKDOWN = re.compile(r"\*\*|__|(?<!\w)[*_](?=\w)|(?<=\w)[*_](?!\w)|^#{1,6}\s+|^>\s?", re.M)
_CONTRACTIONS = [
    (re.compile(r"\bcan'?t\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon'?t\b"), "will not"),
    (re.compile(r"\bshan'?t\b"), "shall not"),
    (re.compile(r"\bain'?t\b"), "is not"),
    (re.compile(r"(?<=[a-z])n't\b"), " not"),
    (re.compile(r"(?<=[a-z])'ve\b"), " have"),
    (re.compile(r"(?<=[a-z])'ll\b"), " will"),
    (re.compile(r"(?<=[a-z])'re\b"), " are"),
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(i|you|we|they|he|she|it)'d\b"), r"\1 would"),
    (re.compile(r"\b(it|that|there|here|what|this)'s\b"), r"\1 is"),
    (re.compile(r"\blet's\b"), "let us"),
]

_ONES_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
)
ONES = {w: n for n, w in enumerate(_ONES_WORDS.split())}
_TENS_WORDS = "twenty thirty forty fifty sixty seventy eighty ninety"
TENS = {w: 10 * n for n, w in enumerate(_TENS_WORDS.split(), start=2)}
SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD = re.compile(r"[a-z]+")
_WORD = re.compile(r"[a-z]+")


def _number_runs(text: str) -> list[tuple[int, int, int]]:
    """Where number words stand, as (start, end, value): "two hundred thirty-nine" is one run, 239.

    A lone "one" (the one you meant, no one) and a lone "a" stay words; "a hundred" is 100.
    """
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
    runs: list[tuple[int, int, int]] = []
    i = 0
    while i < len(words):
        start, end, word = words[i]
        if word not in ONES and word not in TENS and not (word in ("a", "an") and _next_is_scale(words, i)):
            i += 1
            continue
        total, current, last, j, stop = 0, 0, "", i, end
        while j < len(words):
            s, e, w = words[j]
            if j > i and not re.fullmatch(r"[\s-]{1,2}", text[words[j - 1][1] : s]):
                break
            if w in ("a", "an") and j == i:
                current, last = 1, "a"
            elif w == "and" and last in ("hundred", "thousand") and j + 1 < len(words):
                nxt = words[j + 1][2]
                if nxt not in ONES and nxt not in TENS:
                    break
                last = "and"
            elif (w in ONES and last in ("", "hundred", "thousand", "and")) or (
                w in ONES and last == "tens" and ONES[w] < 10
            ):
                current += ONES[w]
                last = "ones" if last != "tens" else "done"
            elif w in TENS and last in ("", "hundred", "thousand", "and"):
                current += TENS[w]
                last = "tens"
            elif w == "hundred" and last in ("ones", "a", "done", "tens") and current < 100 and current % 100:
                current *= 100
                last = "hundred"
            elif w in ("thousand", "million") and last in ("ones", "tens", "hundred", "a", "done"):
                total += max(current, 1) * SCALES[w]
                current, last = 0, "thousand"
            else:
                break
            stop = e
            j += 1
        value = total + current
        if last == "and":  # "… hundred and" then a non-number: the "and" is a word
            stop = words[j - 2][1]
        alone_one = j == i + 1 and word == "one"
        if last != "a" and not alone_one:
            runs.append((start, stop, value))
        i = max(j, i + 1)
    return runs


def _next_is_scale(words: list[tuple[int, int, str]], i: int) -> bool:
    return i + 1 < len(words) and words[i + 1][2] in SCALES


# Sentences end at . ! ? followed by a space (not in "92.0" or "e.g."), at a new line, a list item, a
# table cell. Clauses end at commas, semicolons, colons and dashes between words, and before a joining word.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)[.!?]+(?=\s|$)|\n+")
_CLAUSE_END = re.compile(
    r",\s|;\s*|:\s|\s-\s|\s\((?=\D)|\)\s|\|"
    r"|\s(?=(?:but|however|although|though|whereas|because|so that|so|since|which|while|unless|except|instead|"
    r"as|given|due to|and (?:i|we|you|it|they|the|your|this|that|he|she|there|so|then|also))\s)"
)
_NEGATOR = re.compile(
    r"\b(?:not|never|no|nor|neither|without|unable|failed to|fail to|refused to|declined to|impossible|"
    r"unsuccessful(?:ly)?|instead of|rather than|no longer)\b"
)
# Markers that make what follows in their sentence a supposition, not a statement.
_SUPPOSING = re.compile(
    r"\b(?:if|whether|unless|in case|as soon as|would you like|do you want|want me to|should you|"
    r"shall i|may i|could you|can you|would you)\b"
    r"|\b(?:send|give|tell|share|provide|reply|confirm|let me know|check)\b.*\b(?:and|then) (?:i|we) will\b"
)
# What makes a promise conditional wherever it stands in its sentence ("I will refund it once approved").
_CONDITION = re.compile(r"\b(?:if|once|when|unless|as soon as|after|provided|assuming|until|only)\b")
_SUPPOSING_CLAUSE = re.compile(r"^\s*(?:once|until|after)\b")
_HYPOTHETICAL = re.compile(r"\b(?:would|could|should|might|must) (?:not )?have\b|\b(?:would|might|may)\b")
_FUTURE = re.compile(r"\b(?:will|shall|going to|about to|plan to|intend to)\b")


@dataclass(frozen=True)
class Reading:
    """An answer as the judges read it (see the module docstring)."""

    original: str
    text: str
    src: tuple[tuple[int, int], ...] = field(repr=False)
    sentences: tuple[tuple[int, int, bool], ...] = field(repr=False)  # start, end, is a question
    clause_starts: tuple[int, ...] = field(repr=False)

    def quote(self, start: int, end: int) -> str:
        """The answer's own words behind ``text[start:end]``."""
        if start >= end or not self.src:
            return ""
        a, b = self.src[start][0], self.src[min(end, len(self.src)) - 1][1]
        return " ".join(self.original[a:b].split()).strip(" ,;:*_.!?")

    def sentence_of(self, at: int) -> tuple[int, int, bool]:
        for s in self.sentences:
            if s[0] <= at < s[1]:
                return s
        return (0, len(self.text), False)

    def clause_start(self, at: int) -> int:
        best = self.sentence_of(at)[0]
        for c in self.clause_starts:
            if best <= c <= at:
                best = c
        return best

    def clause_end(self, at: int) -> int:
        end = self.sentence_of(at)[1]
        for c in self.clause_starts:
            if at < c < end:
                return c
        return end


@lru_cache(maxsize=256)
def read(answer: str) -> Reading:
    t = _Tracked(answer or "")
    t.sub(_CHAR, lambda m: _CHARS[m.group()])
    t.sub(_MARKDOWN, "")
    t.lower()
    for pattern, repl in _CONTRACTIONS:
        t.sub(pattern, repl)
    t.replace([(start, end, str(value)) for start, end, value in _number_runs(t.text)])
    t.sub(re.compile(r"\bnoon\b|\bmidday\b"), "12:00")
    t.sub(
        re.compile(r"(?<=\d)( ?)([ap])\.m\.?(?!\w)|(?<=\d )([ap])\.m\.?(?!\w)"),
        lambda m: (m.group(1) or "") + (m.group(2) or m.group(3)) + "m",
    )
    t.sub(re.compile(r"[ \t]+"), " ")
    text = t.text
    sentences: list[tuple[int, int, bool]] = []
    last = 0
    for m in _SENTENCE_END.finditer(text):
        if m.start() > last:
            sentences.append((last, m.end(), "?" in m.group()))
        last = m.end()
    if last < len(text):
        sentences.append((last, len(text), False))
    clause_starts = sorted({m.end() for m in _CLAUSE_END.finditer(text)})
    return Reading(answer or "", text, tuple(t.src), tuple(sentences), tuple(clause_starts))


def reading(answer: str | Reading) -> Reading:
    return answer if isinstance(answer, Reading) else read(answer or "")


# --- numbers, durations, clock times ---------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_TOKEN = re.compile(r"[\w€$£¥%]+")


def number_value(said: str) -> float:
    return float(said.replace(",", ""))


def find_number(answer: str | Reading, value: float, units: Iterable[str] = (), tolerance: float = 0.0) -> str | None:
    """The words where ``answer`` gives ``value`` (within ``tolerance``, absolute), with one of ``units``
    (a word start) beside it if any are named; ``None`` when it does not.

    A unit counts within the two words after the number ("30 calendar days", "30-day") or right
    before it ("EUR 92", "€92").
    """
    r = reading(answer)
    wanted = [reading(u).text.strip() for u in units]
    for m in NUMBER.finditer(r.text):
        if abs(number_value(m.group()) - float(value)) > tolerance:
            continue
        if not wanted:
            return r.quote(m.start(), m.end())
        after_span = r.text[m.end() : m.end() + 40]
        after = _TOKEN.findall(after_span)[:3]
        before = _TOKEN.findall(r.text[max(0, m.start() - 12) : m.start()])[-1:]
        for tok in after + before:
            if any(tok.startswith(u) or (len(u) == 1 and u in tok) for u in wanted):
                lo = m.start() - (len(before[0]) + 1 if before and tok == before[0] else 0)
                hi = m.end() + (after_span.find(tok) + len(tok) if tok in after else 0)
                return r.quote(max(lo, 0), hi)
    return None


DAYS_PER = {"day": 1.0, "week": 7.0, "fortnight": 14.0, "month": 365.25 / 12, "year": 365.25}
_ABOUT, _AT_LEAST, _AT_MOST = "about", "at least", "at most"
_HEDGES = {
    _AT_LEAST: r"(?:well |a little |a bit |just |slightly )?(?:over|more than|upwards of|past|beyond|at least|"
    r"above|longer than)",
    _AT_MOST: r"(?:just |a little |a bit |slightly )?(?:under|less than|below|nearly|almost|not quite|close to|"
    r"shy of|just shy of|getting on for|up to|short of|approaching)",
    _ABOUT: r"(?:about|around|roughly|approximately|approx\.?|some|circa|more or less|or so|an estimated)",
}
_QTY = r"(?P<qty>\d+(?:\.\d+)?|an?|one|half an?|a half|(?:a )?couple of|a single)(?P<half> and a half)?"
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"
_DURATION = re.compile(
    r"(?:(?P<hedge>"
    + "|".join(f"(?P<h{i}>{h})" for i, h in enumerate(_HEDGES.values()))
    + r")\s+)?"
    + _QTY
    + r"(?:\s+|-)(?:calendar |business |working |full |whole |straight )?"
    + _UNIT
    + r"(?P<half2> and a half)?(?![a-z])"
)
_HEDGE_KINDS = list(_HEDGES)


@dataclass(frozen=True)
class Duration:
    days: float
    kind: str  # "about" (a plain or hedged amount), "at least" ("over seven months") or "at most" ("nearly")
    words: str

    def matches(self, days: float, tolerance: float) -> bool:
        """Whether this amount gives ``days`` within ``tolerance`` (a fraction): a plain amount within it either
        way; a bound when it is on the right side and within it ("over seven months" for 239 days)."""
        if self.kind == _AT_LEAST:
            return days * (1 - tolerance) <= self.days <= days
        if self.kind == _AT_MOST:
            return days <= self.days <= days * (1 + tolerance)
        return abs(self.days - days) <= tolerance * days


def durations(answer: str | Reading) -> list[Duration]:
    """Every amount of time the answer gives, in days: "239 days", "30-day", "about eight months",
    "a year and a half", "nearly 34 weeks"."""
    r = reading(answer)
    found = []
    for m in _DURATION.finditer(r.text):
        qty = m.group("qty")
        if qty in ("a", "an", "one", "a single"):
            n = 1.0
        elif qty.startswith("half"):
            n = 0.5
        elif "couple" in qty:
            n = 2.0
        elif qty == "a half":
            continue
        else:
            n = float(qty)
        if m.group("half") or m.group("half2"):
            n += 0.5
        kind = _ABOUT
        if m.group("hedge"):
            kind = next(k for i, k in enumerate(_HEDGE_KINDS) if m.group(f"h{i}"))
        found.append(Duration(n * DAYS_PER[m.group("unit")], kind, r.quote(m.start(), m.end())))
    return found


def find_duration(answer: str | Reading, days: float, tolerance: float) -> Duration | None:
    return next((d for d in durations(answer) if d.matches(days, tolerance)), None)


def time_pattern(hhmm: str) -> re.Pattern[str]:
    """A clock time as a pattern: "13:00", "13.00", "1 pm", "1pm", "1 p.m.", "1:00 pm"."""
    hour, minute = (int(p) for p in hhmm.split(":"))
    h12, suffix = hour % 12 or 12, "am" if hour < 12 else "pm"
    mm = f"{minute:02d}"
    forms = [
        rf"0?{hour}[:.]{mm}",
        rf"{h12}(?:[:.]{mm})?\s?{suffix[0]}\.?m\.?" if minute == 0 else rf"{h12}[:.]{mm}\s?{suffix}",
    ]
    return re.compile(r"(?<![\d:.])(?:" + "|".join(forms) + r")(?![\d])")


# --- claims and their negation ---------------------------------------------------------------------

STATED, DENIED = "stated", "denied"


def _compile(wording: str) -> re.Pattern[str]:
    """A wording as a pattern over read text: ``{not}`` is where a negation may stand ("has {not}been
    refunded"), ``{w}`` any one word, ``{w3}`` up to three words."""
    body = wording.replace("{not}", r"(?P<neg>(?:not|never|no longer|yet to be) )?")
    body = re.sub(r"\{w(\d)\}", lambda m: rf"(?:\S+ ){{0,{m.group(1)}}}?", body)
    body = body.replace("{w}", r"(?:\S+ )")
    start = r"(?<![\w])" if re.match(r"[\w(\\]", body) else ""
    return re.compile(start + r"(?:" + body + r")(?![\w])")


@dataclass(frozen=True)
class Said:
    """One place an answer makes a claim: whether it says it holds (``True``) or not, and its words."""

    holds: bool
    words: str
    start: int
    end: int
    how: str  # STATED, or DENIED (the claim's wording under a negation)


ANY, KNOWING = "any", "knowing"
# What turns around a claim whose wording is a negation already ("you have no orders"): only a denial
# of knowing it ("I can't confirm you have no orders", "this doesn't mean …"), never another verb's "not".
_KNOWING_NEG = re.compile(
    r"\b(?:not|unable to|no way to) (?:\S+ ){0,2}?(?:confirm|tell|say|know|sure|certain|verify|determine|mean|"
    r"claim|conclude|assume|check whether|see whether)\b|\bnot necessarily\b"
)


# A negation right before a wording ("not an empty account", "isn't really no orders") denies any claim.
_ADJACENT_NEG = re.compile(r"\b(?:not|never)(?: (?:a|an|the|any|really|necessarily|exactly|just|simply))? $")


@dataclass(frozen=True)
class Claim:
    """A statement an answer can make: the wordings that say it holds (``says``) and that say it does not
    (``says_not``), as patterns over read text (see ``_compile``).

    ``negation``: ``ANY`` negation before a wording in its clause denies it ("the refund has not been
    processed"); ``KNOWING``: only a denial of knowing it does, for a claim whose wording holds its own
    negation or names a requirement ("you have no orders", "not on your account", "I can't book it
    without your manager's sign-off" still says a manager must approve).
    ``future``: a promise says it too ("you will get your money back"), unless its sentence sets a
    condition ("once approved, I will book it"). ``offer``: a question, a condition or an offer says it
    (a next step: "would you like a call back?"). ``unless``: claims whose wordings, in the same clause,
    mean this one is not made ("I couldn't find order 0912 on your account" is not "no such order").
    """

    name: str
    says: Sequence[str]
    says_not: Sequence[str] = ()
    negation: str = ANY
    future: bool = False
    offer: bool = False
    unless: Sequence[Claim] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "says", tuple(self.says))
        object.__setattr__(self, "says_not", tuple(self.says_not))
        object.__setattr__(self, "unless", tuple(self.unless))
        if self.negation not in (ANY, KNOWING):
            raise ValueError(f"claim {self.name!r}: negation is {ANY!r} or {KNOWING!r}, not {self.negation!r}")
        for wording in (*self.says, *self.says_not):
            try:
                _compile(wording)
            except re.error as exc:
                raise ValueError(
                    f"claim {self.name!r}: the wording {wording!r} is not a valid pattern: {exc}"
                ) from None

    @property
    def patterns(self) -> tuple[tuple[re.Pattern[str], bool], ...]:
        return _patterns(self.says, self.says_not)

    def find(self, answer: str | Reading, *, near: str | None = None) -> list[Said]:
        """Every place the answer says this claim holds or does not; suppositions are left out (unless
        the claim is an ``offer``). ``near``: only in sentences that also carry this term."""
        r = reading(answer)
        found: list[Said] = []
        taken: list[tuple[int, int]] = []
        blocked = [(s.start, s.end) for other in self.unless for s in other.find(r)]
        near_pattern = term_pattern(near) if near else None
        # The wordings that say it does not hold come first: "could not process the refund" is not a refund.
        for pattern, holds in sorted(self.patterns, key=lambda p: p[1]):
            for m in pattern.finditer(r.text):
                if m.end() <= m.start() or any(a < m.end() and m.start() < b for a, b in taken):
                    continue
                sentence = r.sentence_of(m.start())
                if m.end() > sentence[1] + 1:  # a wording never runs on into the next sentence
                    continue
                if near_pattern and not near_pattern.search(r.text, sentence[0], sentence[1]):
                    continue
                clause, clause_end = r.clause_start(m.start()), r.clause_end(m.start())
                if any(clause <= a < max(clause_end, m.end()) for a, _ in blocked):
                    continue
                how = self._how(r, m, sentence, clause, holds)
                if how is None:
                    continue
                taken.append((m.start(), m.end()))
                said = holds if how == STATED else not holds
                found.append(Said(said, r.quote(m.start(), m.end()), m.start(), m.end(), how))
        return sorted(found, key=lambda s: s.start)

    def _how(
        self, r: Reading, m: re.Match[str], sentence: tuple[int, int, bool], clause: int, holds: bool
    ) -> str | None:
        before = r.text[clause : m.start()]
        inside = m.group()
        if not self.offer:
            if sentence[2] or _SUPPOSING.search(r.text, sentence[0], m.start()) or _SUPPOSING_CLAUSE.search(before):
                return None
            if _HYPOTHETICAL.search(before) or (holds and _HYPOTHETICAL.search(inside)):
                return None
            promise = _FUTURE.search(before) or _FUTURE.search(inside)
            if holds and promise and (not self.future or _CONDITION.search(r.text, sentence[0], sentence[1])):
                return None
        if m.groupdict().get("neg"):
            negated = True
        elif self.negation == KNOWING:
            negated = bool(_KNOWING_NEG.search(before) or _ADJACENT_NEG.search(before))
        else:
            negated = bool(_NEGATOR.search(before))
        if not negated:
            return STATED
        # A wording that already says "not" is not turned around again by a negation before it.
        return DENIED if holds else None

    def stated(self, answer: str | Reading, *, holds: bool = True, near: str | None = None) -> list[Said]:
        return [s for s in self.find(answer, near=near) if s.holds == holds]


@lru_cache(maxsize=512)
def _patterns(says: tuple[str, ...], says_not: tuple[str, ...]) -> tuple[tuple[re.Pattern[str], bool], ...]:
    return tuple((_compile(w), True) for w in says) + tuple((_compile(w), False) for w in says_not)


def term_pattern(term: str) -> re.Pattern[str]:
    """A key term as a pattern over read text: from the start of a word, spaces or dashes between words."""
    words = reading(term).text.strip().split(" ")
    body = r"[\s-]+".join(re.escape(w) for w in words)
    start = r"(?<!\w)" if words[0][:1].isalnum() else ""
    end = r"(?!\d)" if words[-1][-1:].isdigit() else ""
    return re.compile(start + body + end)


def find_term(answer: str | Reading, term: str) -> str | None:
    r = reading(answer)
    m = term_pattern(term).search(r.text)
    return r.quote(m.start(), m.end()) if m else None
