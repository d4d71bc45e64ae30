"""Secrets out of everything a run leaves behind: stored traces, cassettes and log lines.

``Redactor(value)`` walks a JSON-able value (dicts, lists, strings; dict keys too) and replaces each
secret it finds with a marker naming what it was, e.g. ``[redacted: anthropic key]``. What counts as
a secret:

- the built-in patterns (``BUILTIN``, always on): Anthropic keys (``sk-ant-…``), OpenAI-style
  ``sk-…`` keys, AWS access key ids (``AKIA…``), GitHub tokens (``ghp_…``, ``github_pat_…``), Slack
  tokens (``xoxb-…``), this dashboard's API tokens (``rlt_…``), ``Bearer <token>``,
  ``Authorization: Basic …``, JWTs, PEM private key blocks, the password in a URL
  (``postgres://user:…@host``), and the value in ``password=…``, ``"api_key": "…"`` or
  ``'token': '…'`` text;
- the string value of any dict key named like a secret (``SECRET_NAME``: ``password``,
  ``client_secret``, ``api_key``, ``apiKey``, ``x-api-key``, ``access_token``, ``Authorization``…;
  case-insensitive, ``*_tokens`` counters excluded);
- the literal values of secret environment variables (``ANTHROPIC_API_KEY``, ``DJANGO_SECRET_KEY``
  and the names listed in ``RLT_REDACT_ENV``), when at least ``MIN_SECRET_LENGTH`` characters;
- extra regular expressions from ``RLT_REDACT_PATTERNS`` (``patterns_from_text``): a JSON list of
  patterns (strings, or ``{"name": …, "pattern": …}`` objects), or one pattern per line. A match is
  replaced whole. The built-ins cannot be turned off.

Redacting is idempotent (a marker is never redacted again), so a cassette's recorded requests and a
replayed run's requests compare equal after both are redacted. No Django here: ``tracer.redaction``
builds its redactor from the settings, the cassette writer (``agents.llm.replay``) from the
environment; both read the same variables.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, AhoCorasick

MARKER = "[redacted: {}]"
# Literal secret values shorter than this are not redacted: a short value ("test") would be replaced
# inside ordinary words.
MIN_SECRET_LENGTH = 8
# Environment variables whose values are always secrets; RLT_REDACT_ENV names more.
SECRET_ENV = ("ANTHROPIC_API_KEY", "DJANGO_SECRET_KEY")

# A dict key or a key in text is named like a secret when it ends with one of these (case-insensitive,
# "_" or "-" between words): "password", "db_password", "client_secret", "x-api-key", "access_token".
# "max_tokens" or "input_tokens" do not end with "token".
_NAME_ENDINGS = (
    r"pass(?:word|wd|phrase)|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|authorization"
)
SECRET_NAME = re.compile(rf"(?:{_NAME_ENDINGS})$", re.IGNORECASE)

_NOT_MARKED = r"(?!\[redacted: )"

_KEY_TRIGGERS = ("pass", "secret", "token", "key", "authorization")

# (what the marker says, regex, triggers). A regex is tried only on text whose lower-case form
# contains one of its triggers (``in`` is much cheaper than a regex scan). A regex may have a group
# named ``keep``: the text it matched stays (a header's name, a URL's user) and the rest of the
# match becomes the marker. Applied in this order, each to the previous one's output.
BUILTIN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "private key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        ("private key",),
    ),
    ("anthropic key", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{8,}", ("sk-ant-",)),
    (
        "openai key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}",
        ("sk-",),
    ),
    ("aws access key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("akia", "asia", "abia", "acca")),
    (
        "github token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    ("slack token", r"\bxox[baprs]-[A-Za-z0-9-]{10,}", ("xox",)),
    # this dashboard's own API tokens (tracer.tokens): rlt_ and 43 URL-safe characters
    ("rlt api token", r"(?<![A-Za-z0-9_-])rlt_[A-Za-z0-9_-]{40,}", ("rlt_",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", ("eyj",)),
    (
        "bearer token",
        r"(?P<keep>\b(?i:bearer)\s+)" + _NOT_MARKED + r"(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*",
        ("bearer",),
    ),
    (
        "credentials",
        r"(?P<keep>\b(?i:(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic|token|digest)\s+)"
        + _NOT_MARKED
        + r"[^\s\"',;]{6,}",
        ("authorization",),
    ),
    (
        "password",
        r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"']*:)" + _NOT_MARKED + r"[^/\s@\"']+(?=@)",
        ("://",),
    ),
    # "api_key": "…" or 'password': '…' (JSON, a Python dict's repr): the value between its quotes
    (
        "secret value",
        rf"(?P<keep>(?i:{_NAME_ENDINGS})(?P<k>[\"'])\s*:\s*(?P<v>[\"']))"
        + _NOT_MARKED
        + r"(?:(?!(?P=v))[^\\\n]|\\.)+(?=(?P=v))",
        _KEY_TRIGGERS,
    ),
    # api_key="…", password='…' (keyword arguments, settings): the value between its quotes
    (
        "secret value",
        rf"(?P<keep>(?i:{_NAME_ENDINGS})\s*=\s*(?P<q>[\"']))" + _NOT_MARKED + r"(?:(?!(?P=q))[^\\\n]|\\.)+(?=(?P=q))",
        _KEY_TRIGGERS,
    ),
    # password=hunter2, ?token=abc&… (query strings, environment files): the value up to a separator
    ("secret value", rf"(?P<keep>(?i:{_NAME_ENDINGS})\s*=\s*)" + _NOT_MARKED + r"[^\s&,;'\")\]}]+", _KEY_TRIGGERS),
)


class RedactionConfigError(ValueError):
    """A redaction pattern from the configuration that cannot be used; the message names it."""


def patterns_from_text(text: str, *, source: str = "RLT_REDACT_PATTERNS") -> list[tuple[str, str]]:
    """The extra patterns configured in ``text``, as ``(name, regex)`` pairs, each checked.

    ``text`` is a JSON list (it starts with ``[``) of regexes or ``{"name": …, "pattern": …}``
    objects, or one regex per line (blank lines skipped). Unnamed patterns are called
    ``custom pattern 1``, ``custom pattern 2``… Raises ``RedactionConfigError`` naming the pattern
    when one is not a valid regular expression or matches the empty string.
    """
    text = (text or "").strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RedactionConfigError(
                f"{source} starts with '[' but is not a JSON list ({exc}); expected a JSON list of regular "
                'expressions or {"name": ..., "pattern": ...} objects, or one regular expression per line'
            ) from None
    else:
        items = [line.strip() for line in text.splitlines() if line.strip()]
    found = []
    for number, item in enumerate(items, 1):
        if isinstance(item, dict) and isinstance(item.get("pattern"), str):
            name, pattern = str(item.get("name") or f"custom pattern {number}"), item["pattern"]
        elif isinstance(item, str):
            name, pattern = f"custom pattern {number}", item
        else:
            raise RedactionConfigError(
                f"{source}: item {number} ({json.dumps(item)}) is neither a regular expression string nor "
                'a {"name": ..., "pattern": ...} object'
            )
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise RedactionConfigError(
                f"{source}: pattern {number} {pattern!r} is not a valid regular expression ({exc})"
            ) from None
        if compiled.search("") is not None:
            raise RedactionConfigError(
                f"{source}: pattern {number} {pattern!r} matches the empty string, so it would insert "
                "markers everywhere; make it match only the secret"
            )
        found.append((name, pattern))
    return found


def env_names(text: str) -> list[str]:
    """``SECRET_ENV`` and the names in ``text`` (``RLT_REDACT_ENV``: comma- or space-separated), once each."""
    names = list(SECRET_ENV)
    for name in re.split(r"[\s,]+", text or ""):
        if name and name not in names:
            names.append(name)
    return names


def secret_name(key: str) -> bool:
    """Whether a dict key names a secret: ``password``, ``apiKey``, ``x-api-key``, ``access_token``…"""
    return _secret_name(key)


@lru_cache(maxsize=4096)
def _secret_name(key: str) -> bool:
    return SECRET_NAME.search(key) is not None


# Strings recur (dict keys, categories, tool names; a span's text read again when its run is
# recorded): their redacted form is kept, for strings up to _CACHED_LENGTH characters, up to
# _CACHE_SIZE of them and _CACHE_CHARS characters in all (then the cache starts again empty).
_CACHED_LENGTH = 4096
_CACHE_SIZE = 8192
_CACHE_CHARS = 4_000_000


# Values ``Redactor.__call__`` returns as they are.
_SCALARS = frozenset({int, float, bool, type(None)})


def _replacement(marker: str, keep: bool) -> Callable[[re.Match[str]], str]:
    """What ``re.sub`` puts in place of a match: the marker, after the ``keep`` group if asked."""
    if keep:
        return lambda match: match.group("keep") + marker
    return lambda match: marker


class NotJSON(TypeError):
    """``Redactor.json`` met a part of a value that is not JSON as it is."""


class Redactor:
    """Replaces secrets in strings and in JSON-able values; built once, used for every value.

    ``patterns``: extra ``(name, regex)`` pairs (or bare regexes), applied after the built-ins.
    ``secrets``: ``{label: literal value}``, e.g. ``{"ANTHROPIC_API_KEY": "sk-ant-…"}``; values
    shorter than ``MIN_SECRET_LENGTH`` are ignored.
    """

    def __init__(
        self, *, patterns: Iterable[tuple[str, str] | str] = (), secrets: Mapping[str, str | None] | None = None
    ) -> None:
        literal = {v: k for k, v in (secrets or {}).items() if v and len(v) >= MIN_SECRET_LENGTH}
        # the longest first, so a value containing another is replaced whole
        self._literals = [(value, MARKER.format(literal[value])) for value in sorted(literal, key=len, reverse=True)]
        self._builtin = []
        for label, regex, triggers in BUILTIN:
            compiled = re.compile(regex)
            self._builtin.append(
                (compiled, _replacement(MARKER.format(label), "keep" in compiled.groupindex), triggers)
            )
        # every trigger once, and each literal as it is and as a JSON string spells it (``clean_json``)
        # leftmost-first: only whether any trigger occurs is asked, and this match kind lets the
        # automaton skip ahead with a SIMD prefilter (faster here than the standard kind)
        self._trigger_scan = AhoCorasick(
            list(dict.fromkeys(t for _, _, triggers in self._builtin for t in triggers)),
            matchkind=MATCHKIND_LEFTMOST_FIRST,
        )
        self._literal_forms = [(value, json.dumps(value)[1:-1]) for value, _ in self._literals]
        self._cache: dict[str, str] = {}
        self._cached_chars = 0
        self._extra = []
        for number, item in enumerate(patterns, 1):
            name, regex = (f"custom pattern {number}", item) if isinstance(item, str) else item
            self._extra.append((re.compile(regex), _replacement(MARKER.format(name), False)))

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by its marker."""
        if len(text) > _CACHED_LENGTH:
            return self._text(text)
        cached = self._cache.get(text)
        if cached is None:
            if len(self._cache) >= _CACHE_SIZE or self._cached_chars >= _CACHE_CHARS:
                self._cache.clear()
                self._cached_chars = 0
            cached = self._cache[text] = self._text(text)
            self._cached_chars += len(text)
        return cached

    def _text(self, text: str) -> str:
        for value, marker in self._literals:
            if value in text:
                text = text.replace(value, marker)
        low = text.lower()
        # one pass for every trigger at once (most text has none), then each pattern's own
        for regex, replace, triggers in self._builtin if self._any_trigger(low) else ():
            for trigger in triggers:
                if trigger in low:
                    redacted = regex.sub(replace, text)
                    if redacted != text:
                        text, low = redacted, redacted.lower()
                    break
        for regex, marker in self._extra:
            text = regex.sub(marker, text)
        return text

    def clean_json(self, text: str) -> bool:
        """Whether the value that ``text`` encodes (a JSON text as ``json.dumps`` writes it by default,
        ASCII only) holds nothing to redact, so ``self(value)`` would equal it: no built-in pattern's
        trigger anywhere in it (a secret-named key needs one too), no secret value, and no extra
        pattern configured (those are tried on every string). One scan of one text instead of a walk
        of the value; a ``\\u`` escape (non-ASCII text, whose lower case a trigger may hide in) also
        answers False, and a trigger that only JSON's own quoting makes up (a false alarm) only means
        the walk is taken after all.
        """
        if "\\u" in text or any(escaped in text for _, escaped in self._literal_forms):
            return False
        return self.clean_text(text)

    def clean_text(self, text: str) -> bool:
        """Whether ``self.text(text)`` is ``text`` as it is, answered by one scan instead of the patterns:
        no built-in pattern's trigger in it, no secret value, and no extra pattern configured (those are
        tried on every string). Since no trigger or secret value holds a NUL character, for strings
        joined by NUL it answers for each of them at once (a trigger made up across two of them, a false
        alarm, only means they are redacted one by one after all)."""
        if self._extra:
            return False
        for value, _ in self._literals:
            if value in text:
                return False
        return not self._any_trigger(text.lower())

    def _any_trigger(self, low: str) -> bool:
        """Whether lower-case ``low`` contains any built-in pattern's trigger: one Aho-Corasick pass
        over the text for all of them, instead of one ``in`` scan per trigger."""
        return bool(self._trigger_scan.find_matches_as_indexes(low))

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` with secrets redacted: strings, dict keys, the values of secret-named
        keys, inside dicts, lists and tuples (which become lists). Other values are returned as they are."""
        return self._walk(value, False)

    def json(self, value: Any) -> Any:
        """``self(value)`` for a value that is JSON already (dicts with string keys, lists, strings,
        numbers, booleans, None: exact types), in one walk; raises ``NotJSON`` at the first part that
        is not (a tuple, a key that is not a string, any other type), for the caller to convert it."""
        return self._walk(value, True)

    def _walk(self, value: Any, strict: bool) -> Any:
        """The walk behind ``__call__`` and, with ``strict``, ``json``."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in _SCALARS:
            return value
        # Below, strings and plain scalars are done in place, a string already in the cache without
        # a call: a span's attributes are hundreds of thousands of short strings, most seen before.
        if kind is dict:
            text, cached, walk = self.text, self._cache.get, self._walk
            out = {}
            for key, item in value.items():
                item_kind = type(item)
                if type(key) is str:
                    if item_kind is str and item and _secret_name(key) and not item.startswith("[redacted: "):
                        out[text(key)] = MARKER.format("secret value")
                        continue
                    done = cached(key)
                    key = text(key) if done is None else done
                elif strict:
                    raise NotJSON
                if item_kind is str:
                    done = cached(item)
                    out[key] = text(item) if done is None else done
                elif item_kind in _SCALARS:
                    out[key] = item
                else:
                    out[key] = walk(item, strict)
            return out
        if kind is list or (kind is tuple and not strict):
            text, walk = self.text, self._walk
            return [
                text(item) if type(item) is str else item if type(item) in _SCALARS else walk(item, strict)
                for item in value
            ]
        if strict:
            raise NotJSON
        return value

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, *, secrets: Mapping[str, str | None] | None = None
    ) -> Redactor:
        """The redactor the environment configures: ``RLT_REDACT_PATTERNS``, and the values of
        ``SECRET_ENV`` and ``RLT_REDACT_ENV``'s names; ``secrets`` adds literal values."""
        env = os.environ if environ is None else environ
        values: dict[str, str | None] = {name: env.get(name) for name in env_names(env.get("RLT_REDACT_ENV", ""))}
        values.update(secrets or {})
        return cls(patterns=patterns_from_text(env.get("RLT_REDACT_PATTERNS", "")), secrets=values)


class RedactingLogFilter(logging.Filter):
    """Redacts a log record's message (after its arguments are put in), traceback and stack.

    Installed on handlers, it covers every record they write, whichever logger it came from.
    ``redactor`` is a callable returning the ``Redactor`` to use (asked for each record, so a
    redactor built lazily or rebuilt after a configuration change is picked up).
    """

    def __init__(self, redactor: Callable[[], Redactor] | None = None, name: str = "") -> None:
        super().__init__(name)
        if redactor is not None:
            self.redactor = redactor

    def redactor(self) -> Redactor:  # replaced per instance, or by subclasses
        return _environ_redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self.redactor()
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it when it formats it
            return True
        redacted = redactor.text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.text(record.stack_info)
        return True


@lru_cache(maxsize=1)
def _environ_redactor() -> Redactor:
    return Redactor.from_environ()
