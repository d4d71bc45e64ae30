"""What a failure message says: its template, its score on what / why / what instead / no internals,
what it leaks, what its words say of the failure, and a rewrite that follows the lessons.

Lesson 001: "A good tool error message has three parts: what went wrong, why, and what to do instead",
and "Keep internal details out". The score reads words, not meaning, and says so: a message *names*
what went wrong when it names one of the call's fields or values, or says something specific beyond
the generic words of an error; it gives a *why* when it holds a reason (is not, must, requires, timed
out, …); a *what instead* when it says what to do (resend, use, one of, e.g., try again later, …).
A rewrite is built from the tool's input schema, the call's input and the failure; what the trace
cannot know is left as a marked gap (``<…>``), never made up.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import is_empty
from ..vocabulary import ErrorCategory

# --- what the model read ------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """The text a tool_result's content gave the model: a structured error's message (with its category
    and flag said after it), a string (JSON decoded when it is JSON), text blocks joined, JSON as JSON."""
    if isinstance(content, str):
        stripped = content.strip()
        if stripped[:1] in ("{", "["):
            try:
                return text_of(json.loads(stripped))
            except ValueError:
                return content
        return content
    if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return text_of("\n".join(str(b.get("text", "")) for b in content))
    if isinstance(content, dict):
        if isinstance(content.get("content"), list) and "isError" in content:  # an MCP CallToolResult
            inner = content.get("structuredContent")
            return text_of(inner if inner is not None else content["content"])
        err = content.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(content.get("message"), str) and ("isError" in content or "errorCategory" in content):
            return content["message"]
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def structured_flags(content: Any) -> tuple[str | None, bool | None]:
    """The ``errorCategory`` and ``isRetryable`` a structured tool_result carried (lesson 002), at the
    top level or under ``error``; (None, None) when it carried none."""
    if isinstance(content, str):
        # the words looked for first: a tool's text output is long, and most carry neither
        if ("errorCategory" not in content and "isRetryable" not in content) or content.lstrip()[:1] != "{":
            return None, None
        return _text_flags(content)
    if not isinstance(content, dict):
        return None, None
    return _dict_flags(content)


@functools.lru_cache(maxsize=4096)
def _text_flags(text: str) -> tuple[str | None, bool | None]:
    """``structured_flags`` of a JSON object sent as text, parsed once however often it is asked."""
    try:
        content = json.loads(text)
    except ValueError:
        return None, None
    return _dict_flags(content) if isinstance(content, dict) else (None, None)


def _dict_flags(content: dict[str, Any]) -> tuple[str | None, bool | None]:
    inner = content.get("error") if isinstance(content.get("error"), dict) else {}
    category = inner.get("errorCategory", content.get("errorCategory"))
    retryable = inner.get("isRetryable", content.get("isRetryable"))
    return (
        category if isinstance(category, str) else None,
        retryable if isinstance(retryable, bool) else None,
    )


# --- templates ------------------------------------------------------------------------------------

_MASKS = (
    (re.compile(r"\[redacted: [^\]]+\]"), "<secret>"),
    # a quoted value, not the apostrophes of "isn't ... can't"
    (re.compile(r"(?<!\w)'[^'\n]{0,200}'(?!\w)|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`"), "'<value>'"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b"), "<email>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b[A-Z]{1,5}-\d+\b"), "<id>"),
    (re.compile(r"\d+(?:[.,:/-]\d+)*"), "<n>"),
)


@functools.lru_cache(maxsize=8192)
def template(text: str) -> str:
    """``text`` with ids, numbers, quoted values and secrets masked, so one message sent about many
    orders is one template: "Refunds close after <n> days. This order is <n> days old."."""
    out = " ".join((text or "").split())
    for pattern, mask in _MASKS:
        out = pattern.sub(mask, out)
    return out[:300]


@functools.lru_cache(maxsize=8192)
def template_key(tool: str, text: str) -> str:
    """A short stable id of a tool's message template (the Tools page's lint rows, the patterns)."""
    return hashlib.sha1(f"{tool}\x1f{template(text)}".encode()).hexdigest()[:16]


# --- leaks --------------------------------------------------------------------------------------

LEAKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a stack trace",
        re.compile(
            r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+"
            r"|\bat [\w$.<>]+\([\w$]+\.(?:java|kt|scala|cs):\d+\)|Exception in thread \""
            r"|goroutine \d+ \[|\bat .+ \(.+\.[jt]s:\d+:\d+\)",
            re.MULTILINE,
        ),
    ),
    (
        "SQL",
        re.compile(
            r"\bSELECT\s.{1,200}?\sFROM\s|\bINSERT\s+INTO\s|\bUPDATE\s+\w+\s+SET\s|\bDELETE\s+FROM\s"
            r"|syntax error at or near|SQLSTATE|\bpsycopg2?\.|\bORA-\d{5}\b|sqlite3\.\w*Error"
            r"|duplicate key value violates",
            re.IGNORECASE | re.DOTALL,
        ),
    ),
    (
        "a hostname or private address",
        re.compile(
            r"\b(?:10\.\d{1,3}\.\d{1,3}\.\d{1,3}|192\.168\.\d{1,3}\.\d{1,3}|172\.(?:1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}"
            r"|127\.0\.0\.1)\b|\blocalhost(?::\d+)?\b|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:internal|local|lan|corp|intra"
            r"|svc|cluster\.local)\b|\b[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*:\d{2,5}\b(?!:)|\b(?:postgres(?:ql)?|mysql|redis"
            r"|mongodb|amqp|jdbc:\w+)://",
            re.IGNORECASE,
        ),
    ),
    (
        "a file path",
        re.compile(
            r"(?<![\w.:/])/(?:usr|var|etc|home|srv|opt|app|tmp|root|mnt|lib|data)/[\w./-]+|\b[A-Z]:\\[\w\\ .-]+"
            r"|\b[\w/.-]+\.(?:py|java|rb|go|js|ts|php|cs):\d+\b"
        ),
    ),
    (
        "a secret",
        re.compile(
            r"\[redacted: [^\]]+\]|\bsk-(?:ant-)?[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|\b(?:password|passwd|secret|"
            r"api[_-]?key|token)\s*[=:]\s*\S{6,}|\bBearer\s+[A-Za-z0-9._~+/-]{16,}",
            re.IGNORECASE,
        ),
    ),
)


@functools.lru_cache(maxsize=8192)
def leaks(text: str) -> tuple[tuple[str, str], ...]:
    """What internal details ``text`` holds: (what, the matched text) for each kind found, in LEAKS order."""
    found = []
    for what, pattern in LEAKS:
        match = pattern.search(text or "")
        if match:
            found.append((what, match.group(0).strip()[:80]))
    return tuple(found)


def without_internals(text: str) -> str:
    """``text`` with the lines and parts that hold internal details removed (for a rewrite's base)."""
    return clean_error_text(text)[0]


def _cut_internals(text: str) -> str:
    """``text`` with the internal details cut out of each line it keeps."""
    kept = []
    for line in (text or "").splitlines():
        if LEAKS[0][1].search(line) or re.match(r"\s+(at |File )", line):
            continue
        for _, pattern in LEAKS[1:]:
            line = pattern.sub("", line)
        line = re.sub(r"\s{2,}", " ", line).strip(" :;,-")
        if line and not line.startswith("Traceback"):
            kept.append(line)
    return "; ".join(kept)


def clean_error_text(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with its internal details taken out, as a harness sends it to the model, and what was
    taken out (``LEAKS`` names, in that order). A line that holds a stack trace, SQL, a hostname, a file
    path or a secret is dropped whole, with the indented lines of a traceback under it; when that
    leaves nothing, the details are cut out of the text instead. Text with none comes back unchanged."""
    found = leaks(text)
    if not found:
        return text, ()
    kept: list[str] = []
    in_trace = False
    for line in text.splitlines():
        if in_trace and (line[:1] in (" ", "\t") or not line.strip()):
            continue
        in_trace = False
        if leaks(line):
            in_trace = bool(LEAKS[0][1].search(line))
            continue
        if line.strip():
            kept.append(line.strip())
    cleaned = " ".join(kept) or _cut_internals(text)
    for _, pattern in LEAKS:  # what a kept line still holds, cut out
        cleaned = pattern.sub("", cleaned)
    cleaned = re.sub(r"\s{2,}", " ", cleaned).strip(" :;,-")
    cleaned = cleaned or "the tool failed (its message held only internal details)"
    return cleaned, tuple(what for what, _ in found)


# --- what the words say ---------------------------------------------------------------------------

_GENERIC = frozenset(
    [
        "a",
        "an",
        "the",
        "error",
        "errors",
        "err",
        "exception",
        "invalid",
        "input",
        "inputs",
        "bad",
        "value",
        "values",
        "failed",
        "failure",
        "fail",
        "fails",
        "tool",
        "something",
        "went",
        "wrong",
        "occurred",
        "occured",
        "unknown",
        "internal",
        "server",
        "request",
        "could",
        "not",
        "be",
        "processed",
        "problem",
        "issue",
        "unexpected",
        "unable",
        "sorry",
        "oops",
        "an",
        "of",
        "to",
        "with",
        "->",
        "call",
        "operation",
        "result",
        "malformed",
        "incorrect",
        "wrong",
    ]
)
_EXCEPTION_NAME = re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Fault|Failure)\s*:?\s*$")
WHY = re.compile(
    r"\bbecause\b|\bsince\b|\bis not\b|\bisn't\b|\bare not\b|\baren't\b|\bmust\b|\brequires?\b|\bonly\b|\bclose[sd]?\b"
    r"|\bexpired?\b|\btoo (?:old|large|long|many|big|small)\b|\bexceed|\btimed out\b|\btime ?out\b|\bunavailable\b"
    r"|\brate.?limit|\boverloaded\b|\bnot (?:in|a|an|on|allowed|permitted|found|supported|valid|yours|available)\b"
    r"|\bdoes(?:n't| not)\b|\bcannot\b|\bcan't\b|\bshould be\b|\bexpected\b|\bout of range\b|\b(?:greater|less|more|"
    r"fewer) than\b|\bat (?:most|least)\b|\bno access\b|\bdenied\b|\brevoked\b|\bbelongs?\b|\bdays old\b|\bformat\b"
    r"|\bno such\b|\bmatches no\b|\balready\b|\bmissing\b|\brequired\b|\bforbidden\b|\bunauthori[sz]ed\b|\bquota\b"
    r"|\bfull\b|\bgone\b|\bstill failing\b|\breturned \d{3}\b",
    re.IGNORECASE,
)
INSTEAD = re.compile(
    r"\bresend\b|\bsend (?:it |them )?(?:again|as)\b|\bretry\b|\btry (?:again|later|another|a different)\b|\buse "
    r"|\bask\b|\bcheck\b|\bvalid \w+(?: \w+)?:|\bone of\b|\be\.g\.|\bfor example\b|\bsuch as\b|\binstead\b"
    r"|\bshould be\b"
    r"|\bexpected (?:one of|a |an |format)|\bcontact\b|\bwait\b|\blook (?:it )?up\b|\bsearch\w*\b|\bprovide\b"
    r"|\bcorrect(?:ed)?\b|\bexplain\b|\btell the (?:user|customer)\b|\bdo not retry\b|\bdon't retry\b|\bplease \w+\b"
    r"|\bavailable (?:\w+ )?(?:are|is)\b|\brenew\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Lint:
    """One message's score on the lesson's four parts, with what was found for each."""

    what: bool
    why: bool
    instead: bool
    internals: tuple[tuple[str, str], ...]  # (what, matched) for each internal detail found

    @property
    def no_internals(self) -> bool:
        return not self.internals

    @property
    def score(self) -> int:
        """0 to 4: one for each of what, why, what instead and no internals."""
        return sum((self.what, self.why, self.instead, self.no_internals))

    @property
    def vague(self) -> bool:
        """It says nothing of what went wrong, why or what to do."""
        return not (self.what or self.why or self.instead)

    @property
    def missing(self) -> list[str]:
        parts = [("what went wrong", self.what), ("why", self.why), ("what to do instead", self.instead)]
        out = [name for name, present in parts if not present]
        if self.internals:
            out.append("no internal details (it has " + ", ".join(w for w, _ in self.internals) + ")")
        return out


def _names_of(call_input: Any, schema: dict[str, Any] | None) -> tuple[set[str], set[str]]:
    fields = set()
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        fields |= {str(k) for k in schema["properties"]}
    values = set()
    if isinstance(call_input, dict):
        fields |= {str(k) for k in call_input}
        for v in call_input.values():
            if isinstance(v, str | int | float) and not isinstance(v, bool) and len(str(v).strip()) >= 2:
                values.add(str(v).strip().lower())
    return {f.lower() for f in fields}, values


def lint(text: str, *, call_input: Any = None, schema: dict[str, Any] | None = None) -> Lint:
    """Score ``text``, a failure message the model was sent, for a call with ``call_input`` to a tool with
    input ``schema``."""
    text = text or ""
    specific, why, instead, internals = _text_parts(text)
    what = specific is True
    if specific is None:  # the words alone do not say: does it name one of the call's fields or values?
        low = text.lower()
        fields, values = _names_of(call_input, schema)
        what = any(v in low for v in values) or any(
            re.search(rf"\b{re.escape(f)}\b", low) for f in fields if len(f) >= 2
        )
    return Lint(what=what, why=why, instead=instead, internals=internals)


@functools.lru_cache(maxsize=8192)
def _text_parts(text: str) -> tuple[bool | None, bool, bool, tuple[tuple[str, str], ...]]:
    """What ``text`` says whatever the call: whether it names what went wrong (True: specific words;
    False: nothing, or an exception's name alone; None: only a field or value of the call could tell),
    then its why, its what instead and its internal details."""
    if not text.strip() or _EXCEPTION_NAME.match(text):
        specific: bool | None = False
    else:
        words = re.findall(r"[a-z][a-z_]+|\d+", text.lower())
        specific = True if sum(1 for w in words if w not in _GENERIC) >= 2 else None
    return specific, bool(WHY.search(text)), bool(INSTEAD.search(text)), leaks(text)


_BY_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        ErrorCategory.FATAL,
        re.compile(
            r"credentials? (?:were |was |have been |are )?revoked|\b401\b|invalid api key|disk (?:is )?full|no space "
            r"left|sandbox (?:is |was |has )?(?:gone|terminated|destroyed|lost)",
            re.IGNORECASE,
        ),
    ),
    (
        ErrorCategory.TRANSIENT,
        re.compile(
            r"timed? ?out|timeout|temporarily|\bunavailable\b|\b50[234]\b|\b429\b|rate.?limit|overloaded|try again "
            r"later|connection (?:reset|refused|closed)|econnreset|network (?:error|unreachable)",
            re.IGNORECASE,
        ),
    ),
    (
        ErrorCategory.PERMISSION,
        re.compile(
            r"permission|not allowed|not permitted|forbidden|\b403\b|requires [\w ]*approval|access (?:is )?denied|no "
            r"access|(?:is not|isn't) on your account|belongs to (?:another|someone)",
            re.IGNORECASE,
        ),
    ),
    (
        ErrorCategory.BUSINESS,
        re.compile(
            r"refunds? close|window (?:has )?closed|too old|days old|not eligible|already (?:refunded|cancel+ed|"
            r"shipped|paid)|limit (?:reached|exceeded)|out of stock|insufficient funds",
            re.IGNORECASE,
        ),
    ),
    (
        ErrorCategory.VALIDATION,
        re.compile(
            r"invalid input ->|input should be|must be|should be|is not in [\w -]+ format|not a valid|is not valid|"
            r"unknown [\w ]*(?:id|key|value|name)\b|expected one of|is required|missing (?:required )?(?:field|"
            r"argument|parameter)|no \w+ [\w-]*\d[\w-]* (?:was|were) found|matches no|(?:was|were|is) not found"
            r"|does not exist|doesn't exist",
            re.IGNORECASE,
        ),
    ),
)


@functools.lru_cache(maxsize=8192)
def category_from_words(text: str) -> tuple[str, str] | None:
    """The category ``text``'s own words name, with the words that name it, when they name one; None
    when they say nothing of it (a bare "Error")."""
    for category, pattern in _BY_WORDS:
        match = pattern.search(text or "")
        if match:
            return category, match.group(0)
    return None


NOTHING_FOUND = re.compile(
    r"\bno (?:[a-z]+ ){0,2}(?:orders|results?|matches|records|items|entries|rows|files|documents|customers|users|"
    r"slots|bookings|products|data) (?:were |was )?found\b|\bfound "
    r"nothing\b|\bnothing (?:was |were )?found\b|\bno results?\b|\b(?:zero|0) (?:results|matches|records|items)\b"
    r"|\bempty (?:result|list|response)\b",
    re.IGNORECASE,
)


def says_nothing_found(content: Any, text: str) -> bool:
    """Whether what came back says "nothing found": an empty list or object of empty lists, a category
    "empty", or words such as "No orders found" (not "No order 0781 was found", a wrong id)."""
    category, _ = structured_flags(content)
    if category == "empty":
        return True
    if isinstance(content, list | dict) and is_empty(content):
        return True
    return bool(text) and _says_nothing_found(text)


@functools.lru_cache(maxsize=8192)
def _says_nothing_found(text: str) -> bool:
    return bool(NOTHING_FOUND.search(text))


# --- rewrites -----------------------------------------------------------------------------------


@dataclass
class Rewrite:
    """A suggested message (what / why / what instead), the structured result to send it in, and which
    parts came from where."""

    message: str
    category: str | None
    retryable: bool | None
    basis: list[str] = field(default_factory=list)  # e.g. "the tool's own message", "the input schema"

    @property
    def structured(self) -> dict[str, Any]:
        """The tool_result to send (lesson 002's ``fail``)."""
        error: dict[str, Any] = {"errorCategory": self.category or "<category>", "isRetryable": bool(self.retryable)}
        error["message"] = self.message
        return {"isError": True, "error": error}


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _expected(spec: dict[str, Any]) -> str | None:
    """What a field's schema says a valid value is, in words."""
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        options = [repr(v) for v in spec["enum"][:12]]
        return "one of " + ", ".join(options) + (" …" if len(spec["enum"]) > 12 else "")
    parts = []
    if spec.get("format") == "date":
        parts.append("a date as YYYY-MM-DD")
    if isinstance(spec.get("description"), str) and spec["description"].strip():
        parts.append(spec["description"].strip().rstrip("."))
    if "exclusiveMinimum" in spec:
        parts.append(f"greater than {spec['exclusiveMinimum']}")
    elif "minimum" in spec:
        parts.append(f"at least {spec['minimum']}")
    if "maximum" in spec:
        parts.append(f"at most {spec['maximum']}")
    if isinstance(spec.get("pattern"), str) and not parts:
        parts.append(f"matching {spec['pattern']}")
    return "; ".join(parts) or None


def _violation(name: str, value: Any, spec: dict[str, Any]) -> str | None:
    """What is wrong with ``value`` by the field's schema, when the schema says; None when it fits."""
    kind = spec.get("type")
    if isinstance(spec.get("enum"), list) and spec["enum"] and value not in spec["enum"]:
        return "is not supported"
    if kind == "string" and not isinstance(value, str):
        return "is not text"
    if kind in ("number", "integer") and (isinstance(value, bool) or not isinstance(value, int | float)):
        return "is not a number"
    if isinstance(value, str):
        if isinstance(spec.get("pattern"), str):
            try:
                if not re.search(spec["pattern"], value):
                    return "is not in the expected form"
            except re.error:
                pass
        if spec.get("format") == "date" and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return "is not a date as YYYY-MM-DD"
        if isinstance(spec.get("minLength"), int) and len(value) < spec["minLength"]:
            return "is too short"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            return f"must be greater than {spec['exclusiveMinimum']}"
        if "minimum" in spec and value < spec["minimum"]:
            return f"must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"must be at most {spec['maximum']}"
    return None


def _field_specs(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    defs = schema.get("$defs") or schema.get("definitions") or {}
    out = {}
    for name, spec in schema["properties"].items():
        if isinstance(spec, dict) and "$ref" in spec and isinstance(defs, dict):
            spec = {
                **defs.get(str(spec["$ref"]).rsplit("/", 1)[-1], {}),
                **{k: v for k, v in spec.items() if k != "$ref"},
            }
        out[str(name)] = spec if isinstance(spec, dict) else {}
    return out


_INSTEAD_BY_CATEGORY = {
    ErrorCategory.PERMISSION: "a retry will not change this; tell the user why, and <what they can do instead>",
    ErrorCategory.BUSINESS: "this is final and a retry will not change it; explain it to the user",
    ErrorCategory.TRANSIENT: "it is safe to try again in a few seconds",
    ErrorCategory.FATAL: "the run must stop; an operator has to <fix what broke> before this can work",
}


def rewrite(
    *,
    tool: str,
    call_input: Any,
    schema: dict[str, Any] | None,
    category: str | None,
    sent: str,
    known: str | None = None,
) -> Rewrite:
    """A message for this failure that says what went wrong, why and what to do instead.

    ``sent`` is what the model was sent; ``known`` the tool's own message when the harness sent less
    (a bare "Error" over a message the tool wrote). Built from, in order: the better of the two with
    internal details removed, a field of the input that breaks the tool's input schema, else the
    category's words with gaps marked ``<…>`` for what the trace does not say.
    """
    basis: list[str] = []
    specs = _field_specs(schema)
    inputs = call_input if isinstance(call_input, dict) else {}
    base = ""
    candidates = [(known, "the tool's own message"), (sent, "the message sent")]
    for text, said in candidates:
        if text and not lint(text, call_input=call_input, schema=schema).vague:
            base, basis = without_internals(text), [said + (" without its internal details" if leaks(text) else "")]
            break
    if not base and (category in (None, ErrorCategory.VALIDATION)):
        for name, value in inputs.items():
            problem = _violation(name, value, specs.get(name, {}))
            if problem:
                expected = _expected(specs.get(name, {}))
                base = f"{name} {_shown(value)!r} {problem}"
                if expected:
                    base += f"; expected {expected}"
                basis = ["the input schema and the call's input"]
                category = category or ErrorCategory.VALIDATION
                break
    if not base:
        named = next(iter(inputs.items()), None)
        subject = f"{named[0]} {_shown(named[1])!r}" if named else "this call"
        reason = {
            ErrorCategory.VALIDATION: "<which field is wrong and what a valid value looks like>",
            ErrorCategory.PERMISSION: "<who may do this, and why this call may not>",
            ErrorCategory.BUSINESS: "<the rule that refuses it, with its numbers>",
            ErrorCategory.TRANSIENT: "<the service that did not answer> did not answer in time",
            ErrorCategory.FATAL: "<what broke: credentials, disk, sandbox>",
        }.get(category or "", "<what went wrong, and why>")
        base = f"{tool} failed for {subject}: {reason}"
        basis = ["the call's input" if named else "the tool's name", "gaps marked <…> the trace cannot fill"]
    message = base.rstrip(". ")
    scored = lint(message, call_input=call_input, schema=schema)
    if not scored.instead:
        if category == ErrorCategory.VALIDATION or category is None:
            spec_name = next((n for n in inputs if n in specs), next(iter(specs), None))
            example = specs.get(spec_name or "", {}).get("examples") or []
            hint = f"resend the call with a corrected {spec_name}" if spec_name else "resend the call corrected"
            if example:
                hint += f", e.g. {example[0]!r}"
            message += f"; {hint}"
        else:
            message += f"; {_INSTEAD_BY_CATEGORY[category]}"
    retryable = category == ErrorCategory.TRANSIENT if category else None
    return Rewrite(message=message, category=category, retryable=retryable, basis=basis)
