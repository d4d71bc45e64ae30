"""JSON from outside, read by one decoder with one set of bounds: the API's bodies, the Import page's
and ``import_traces``' files, OTLP JSON bodies and the JSON text inside span attributes, and the JSON
fields of the admin's forms all go through ``json_parse``.

``json.loads`` recurses once per level of arrays and objects, and so does everything that reads the
value after it (redaction, validation, the JSON columns' encoder): a document nested thousands deep
raised ``RecursionError``, a 500, wherever nobody caught it. So a document nested deeper than
``MAX_DEPTH`` is refused before it is parsed, with ``JsonTooDeep`` naming the limit; at most that
deep, every reader after the decoder has stack to spare. The check costs a few passes over the text's
brackets (strings left out), in C, and none for a document with fewer brackets than the limit. Strict as
well: ``NaN`` and ``Infinity``, which no database column takes, are refused (``ValueError``).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Levels of arrays and objects a document may hold. Deep enough for any run document, OTLP request
# or tool input seen in practice (OTLP's own structure takes about ten), far inside Python's stack.
MAX_DEPTH = 100

# Every byte but brackets and quotes, deleted by bytes.translate; strings, with their brackets, then go
# whole; each pass after takes away the innermost pairs, one level.
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'[]{}"'))
_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")


class JsonTooDeep(ValueError):
    """The document nests arrays and objects deeper than ``MAX_DEPTH``."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels of arrays and objects, the most that is read")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def too_deep(text: str | bytes) -> bool:
    """Whether ``text`` nests arrays and objects deeper than ``MAX_DEPTH`` (outside its strings)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False
    # Escaped backslashes, then escaped quotes, go first, so the quotes left are those of strings.
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = _STRING.sub(b"", data)
    for _ in range(MAX_DEPTH):
        if not brackets:
            return False
        brackets, removed = _INNERMOST.subn(b"", brackets)
        if not removed:
            return False  # brackets that do not pair: json.loads says where
    return bool(_INNERMOST.search(brackets))


def json_parse(text: str | bytes) -> Any:
    """``text`` as JSON, or ``JsonTooDeep``, ``json.JSONDecodeError`` (with its line and column) or
    ``ValueError`` (NaN, Infinity); bytes are read as UTF-8 (``UnicodeDecodeError`` otherwise)."""
    if too_deep(text):
        raise JsonTooDeep()
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8-sig")
    return json.loads(text, parse_constant=_refuse_constant)


class BoundedJSONDecoder(json.JSONDecoder):
    """``json_parse``'s bounds for readers that take a decoder class (Django's ``forms.JSONField``):
    too deep is a ``JSONDecodeError`` whose message names the limit."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("parse_constant", _refuse_constant)
        super().__init__(*args, **kwargs)

    def decode(self, s: str, *args, **kwargs) -> Any:
        if too_deep(s):
            raise json.JSONDecodeError(str(JsonTooDeep()), s, 0)
        try:
            return super().decode(s, *args, **kwargs)
        except json.JSONDecodeError:
            raise
        except ValueError as exc:  # NaN, Infinity
            raise json.JSONDecodeError(str(exc), s, 0) from None
