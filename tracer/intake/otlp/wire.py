"""The OTLP/HTTP wire format of traces: request bodies to plain ``Span`` values, and the answers.

A body is an ``ExportTraceServiceRequest`` in protobuf (``application/x-protobuf``) or in OTLP's JSON
encoding (``application/json``: hex trace and span ids, 64-bit integers as numbers or strings, enums
as numbers), optionally gzip-compressed (``Content-Encoding: gzip``). Both decode to the same
``Span`` values, so nothing downstream knows which encoding a sender used.

What cannot be read refuses the whole request with ``WireError``: a body that is not protobuf or JSON,
a field of the wrong type. Its ``path`` names the field the way the JSON encoding spells it
(``resourceSpans[0].scopeSpans[0].spans[3].attributes[2].value.intValue``) and its message says what
was expected. A span that decodes but cannot belong to any trace (a trace or span id that is empty,
all zeros or of the wrong length) is only left out, and counted in the response's
``partial_success``, as the OTLP specification asks.

Answers follow OTLP/HTTP: an ``ExportTraceServiceResponse`` on success, a ``google.rpc.Status`` (with
a ``BadRequest`` detail naming the field) on a refusal, in the encoding of the request.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, field, fields
from typing import Any

from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from ...json_input import json_parse

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

STATUS_UNSET = trace_pb2.Status.STATUS_CODE_UNSET
STATUS_OK = trace_pb2.Status.STATUS_CODE_OK
STATUS_ERROR = trace_pb2.Status.STATUS_CODE_ERROR
SPAN_KINDS = dict(trace_pb2.Span.SpanKind.items())  # "SPAN_KIND_INTERNAL": 1, …
STATUS_CODES = dict(trace_pb2.Status.StatusCode.items())

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8


@dataclass(slots=True)
class Span:
    """One span as the receiver keeps it: ids in lowercase hex, attribute values as plain Python."""

    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    name: str
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    status_code: int = STATUS_UNSET
    status_message: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)  # {"name", "time_ns", "attributes"}
    resource: dict[str, Any] = field(default_factory=dict)  # the resource's attributes
    scope: str = ""  # the instrumentation scope's name

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SPAN_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Span:
        return cls(**data)


SPAN_FIELDS = tuple(f.name for f in fields(Span))


def clean(text: str) -> str:
    """Text with each NUL character (which PostgreSQL cannot store) replaced by U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


class WireError(ValueError):
    """A request that cannot be read: ``path`` names the field, the message says what was expected."""

    def __init__(self, path: str, expected: str, got: str = "") -> None:
        self.path = path
        self.expected = expected
        self.got = got
        where = f"{path}: " if path else ""
        super().__init__(f"{where}expected {expected}" + (f", got {got}" if got else ""))


class BodyTooLarge(ValueError):
    def __init__(self, limit: int, *, decompressed: bool = False) -> None:
        self.limit = limit
        what = "decompressed body" if decompressed else "body"
        super().__init__(f"the {what} is larger than {limit} bytes (RLT_OTLP_MAX_BYTES); send fewer spans per request")


class UnsupportedMediaType(ValueError):
    pass


@dataclass
class Decoded:
    spans: list[Span]
    rejected: list[str]  # why each left-out span was left out ("<path>: <reason>")


def media_type(content_type: str) -> str:
    """``application/x-protobuf`` or ``application/json`` from a Content-Type, or UnsupportedMediaType."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if kind == JSON:
        return JSON
    raise UnsupportedMediaType(f"Content-Type {kind or '(none)'!r} is not an OTLP encoding: send {PROTOBUF} or {JSON}")


def decompressed(body: bytes, content_encoding: str, *, max_bytes: int) -> bytes:
    """The body without its gzip encoding, refused once it grows past ``max_bytes``."""
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported: send gzip or none")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise WireError("", "a gzip-compressed body (Content-Encoding: gzip)", str(exc)) from exc
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise BodyTooLarge(max_bytes, decompressed=True)
    if not inflater.eof:
        raise WireError("", "a complete gzip stream", "a truncated one")
    return out


def decode(body: bytes, *, kind: str) -> Decoded:
    """The spans of an ``ExportTraceServiceRequest`` body in ``kind`` (a media type from ``media_type``)."""
    if kind == PROTOBUF:
        return _decode_protobuf(body)
    return _decode_json(body)


# -- protobuf ---------------------------------------------------------------------------------------


def _pb_value(value) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if which == "string_value_strindex":
        return None  # a profiles-only reference into a string table traces do not have
    if which == "string_value":
        return clean(value.string_value)
    if which == "double_value":
        return finite(value.double_value)
    return getattr(value, which)


def _pb_attributes(attributes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in attributes:  # most values are strings: read those without a call
        key, value = kv.key, kv.value
        if "\x00" in key:
            key = clean(key)
        text = value.string_value  # "" unless the value is a string
        if text or value.WhichOneof("value") == "string_value":
            out[key] = text if "\x00" not in text else clean(text)
        else:
            out[key] = _pb_value(value)
    return out


def _decode_protobuf(body: bytes) -> Decoded:
    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise WireError(
            "", "an ExportTraceServiceRequest in protobuf encoding", str(exc) or "undecodable bytes"
        ) from exc
    spans: list[Span] = []
    rejected: list[str] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _pb_attributes(resource_spans.resource.attributes)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = clean(scope_spans.scope.name)
            for i, pb in enumerate(scope_spans.spans):
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                problem = _id_problem(pb.trace_id, TRACE_ID_BYTES, f"{path}.traceId") or _id_problem(
                    pb.span_id, SPAN_ID_BYTES, f"{path}.spanId"
                )
                if problem:
                    rejected.append(problem)
                    continue
                parent = pb.parent_span_id
                if parent and len(parent) != SPAN_ID_BYTES:
                    rejected.append(f"{path}.parentSpanId: expected {SPAN_ID_BYTES} bytes or none, got {len(parent)}")
                    continue
                spans.append(
                    Span(
                        trace_id=pb.trace_id.hex(),
                        span_id=pb.span_id.hex(),
                        parent_span_id=parent.hex() if parent and any(parent) else "",
                        name=clean(pb.name),
                        kind=pb.kind,
                        start_ns=pb.start_time_unix_nano,
                        end_ns=pb.end_time_unix_nano,
                        attributes=_pb_attributes(pb.attributes),
                        status_code=pb.status.code,
                        status_message=clean(pb.status.message),
                        events=[
                            {
                                "name": clean(e.name),
                                "time_ns": e.time_unix_nano,
                                "attributes": _pb_attributes(e.attributes),
                            }
                            for e in pb.events
                        ],
                        resource=resource,
                        scope=scope,
                    )
                )
    return Decoded(spans, rejected)


def _id_problem(raw: bytes, size: int, path: str) -> str | None:
    if len(raw) != size:
        return f"{path}: expected {size} bytes, got {len(raw)}"
    if not any(raw):
        return f"{path}: is all zeros, which the OTLP specification makes invalid"
    return None


# -- JSON -------------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}.get(
        type(value), "an object"
    )


def _got(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)[:40] if not isinstance(value, dict) else "{…}"
    return f"{_type_name(value)} ({text})" if not isinstance(value, (dict, list)) else _type_name(value)


def _field(obj: dict, camel: str, snake: str | None = None) -> Any:
    """A field by its lowerCamelCase name, or by the proto's own name (which protobuf's JSON also accepts)."""
    if camel in obj:
        return obj[camel]
    return obj.get(snake) if snake else None


def _object(value: Any, path: str, *, optional: bool = True) -> dict:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise WireError(path, "an object", _got(value))
    return value


def _array(value: Any, path: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(path, "an array", _got(value))
    return value


def _string(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(path, "a string", _got(value))
    return clean(value)


def _integer(value: Any, path: str, *, unsigned: bool = False) -> int:
    """A 64-bit integer: a JSON number without a fraction, or a decimal string (as OTLP JSON sends them)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise WireError(path, "an integer", _got(value))
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip(), 10)
        except ValueError:
            raise WireError(path, "an integer (a number or a decimal string)", _got(value)) from None
    else:
        raise WireError(path, "an integer (a number or a decimal string)", _got(value))
    low = 0 if unsigned else -(2**63)
    high = 2**64 - 1 if unsigned else 2**63 - 1
    if not low <= number <= high:
        raise WireError(path, f"an integer from {low} to {high}", _got(value))
    return number


def _double(value: Any, path: str) -> float | None:
    """A double: a number, or protobuf JSON's "NaN", "Infinity" and "-Infinity", which are kept as
    None (``finite``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise WireError(path, "a number", _got(value))
    if isinstance(value, str):
        try:
            return finite(float(value))  # float() reads "NaN", "Infinity" and "-Infinity" too
        except ValueError:
            raise WireError(path, "a number", _got(value)) from None
    return finite(float(value))


def finite(number: float) -> float | None:
    """A double attribute as it is kept: None for NaN and the infinities, which JSON (what the runs and
    the stored spans are written as) has no number for, so a trace read when its spans arrive and read
    again from storage says the same, and a run holding one can be written."""
    return number if math.isfinite(number) else None


def _enum(value: Any, path: str, names: dict[str, int]) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return _integer(value, path)


def _hex_id(value: Any, path: str, size: int) -> tuple[bytes, str | None]:
    """A trace or span id: hex as OTLP JSON sends it (base64, protobuf's own JSON mapping, is accepted
    too), and what is wrong with it when it is a string that is no id of ``size`` bytes (that span is
    left out, in ``partial_success``, as protobuf's are); a value that is no string is a ``WireError``."""
    text = _string(value, path)
    if not text:
        return b"", None
    if len(text) == 2 * size:
        try:
            return bytes.fromhex(text), None
        except ValueError:
            pass
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw, None
    return b"", f"{path}: expected {2 * size} hex digits, got {_got(value)}"


def _json_value(value: Any, path: str) -> Any:
    obj = _object(value, path)
    for name, snake in (
        ("stringValue", "string_value"),
        ("boolValue", "bool_value"),
        ("intValue", "int_value"),
        ("doubleValue", "double_value"),
        ("arrayValue", "array_value"),
        ("kvlistValue", "kvlist_value"),
        ("bytesValue", "bytes_value"),
    ):
        raw = _field(obj, name, snake)
        if raw is None:
            continue
        where = f"{path}.{name}"
        if name == "stringValue":
            return _string(raw, where)
        if name == "boolValue":
            if not isinstance(raw, bool):
                raise WireError(where, "true or false", _got(raw))
            return raw
        if name == "intValue":
            return _integer(raw, where)
        if name == "doubleValue":
            return _double(raw, where)
        if name == "arrayValue":
            values = _array(_object(raw, where).get("values"), f"{where}.values")
            return [_json_value(v, f"{where}.values[{k}]") for k, v in enumerate(values)]
        if name == "kvlistValue":
            values = _array(_object(raw, where).get("values"), f"{where}.values")
            return _json_attributes(values, f"{where}.values")
        text = _string(raw, where)
        try:
            base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise WireError(where, "base64 bytes", _got(raw)) from None
        return text
    return None  # an empty AnyValue


def _json_attributes(items: Any, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, item in enumerate(_array(items, path)):
        where = f"{path}[{k}]"
        kv = _object(item, where, optional=False)
        key = _string(kv.get("key"), f"{where}.key")
        out[key] = _json_value(kv.get("value"), f"{where}.value")
    return out


def _decode_json(body: bytes) -> Decoded:
    try:
        document = json_parse(body)
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: not JSON, too deep, NaN
        raise WireError("", "an ExportTraceServiceRequest in OTLP JSON encoding", f"invalid JSON ({exc})") from exc
    root = _object(document, "(body)", optional=False)
    spans: list[Span] = []
    rejected: list[str] = []
    for r, rs in enumerate(_array(_field(root, "resourceSpans", "resource_spans"), "resourceSpans")):
        rpath = f"resourceSpans[{r}]"
        rs = _object(rs, rpath, optional=False)
        res = _object(rs.get("resource"), f"{rpath}.resource")
        resource = _json_attributes(res.get("attributes"), f"{rpath}.resource.attributes")
        for s, ss in enumerate(_array(_field(rs, "scopeSpans", "scope_spans"), f"{rpath}.scopeSpans")):
            spath = f"{rpath}.scopeSpans[{s}]"
            ss = _object(ss, spath, optional=False)
            scope = _string(_object(ss.get("scope"), f"{spath}.scope").get("name"), f"{spath}.scope.name")
            for i, raw in enumerate(_array(ss.get("spans"), f"{spath}.spans")):
                path = f"{spath}.spans[{i}]"
                span = _object(raw, path, optional=False)
                trace_id, bad_trace = _hex_id(_field(span, "traceId", "trace_id"), f"{path}.traceId", TRACE_ID_BYTES)
                span_id, bad_span = _hex_id(_field(span, "spanId", "span_id"), f"{path}.spanId", SPAN_ID_BYTES)
                parent, bad_parent = _hex_id(
                    _field(span, "parentSpanId", "parent_span_id"), f"{path}.parentSpanId", SPAN_ID_BYTES
                )
                status = _object(span.get("status"), f"{path}.status")
                events = []
                for e, event in enumerate(_array(span.get("events"), f"{path}.events")):
                    epath = f"{path}.events[{e}]"
                    event = _object(event, epath, optional=False)
                    events.append(
                        {
                            "name": _string(event.get("name"), f"{epath}.name"),
                            "time_ns": _integer(
                                _field(event, "timeUnixNano", "time_unix_nano"), f"{epath}.timeUnixNano", unsigned=True
                            ),
                            "attributes": _json_attributes(event.get("attributes"), f"{epath}.attributes"),
                        }
                    )
                decoded = Span(
                    trace_id=trace_id.hex(),
                    span_id=span_id.hex(),
                    parent_span_id=parent.hex() if any(parent) else "",
                    name=_string(span.get("name"), f"{path}.name"),
                    kind=_enum(span.get("kind"), f"{path}.kind", SPAN_KINDS),
                    start_ns=_integer(
                        _field(span, "startTimeUnixNano", "start_time_unix_nano"),
                        f"{path}.startTimeUnixNano",
                        unsigned=True,
                    ),
                    end_ns=_integer(
                        _field(span, "endTimeUnixNano", "end_time_unix_nano"), f"{path}.endTimeUnixNano", unsigned=True
                    ),
                    attributes=_json_attributes(span.get("attributes"), f"{path}.attributes"),
                    status_code=_enum(status.get("code"), f"{path}.status.code", STATUS_CODES),
                    status_message=_string(status.get("message"), f"{path}.status.message"),
                    events=events,
                    resource=resource,
                    scope=scope,
                )
                problem = (
                    bad_trace
                    or bad_span
                    or bad_parent
                    or _id_problem(trace_id, TRACE_ID_BYTES, f"{path}.traceId")
                    or _id_problem(span_id, SPAN_ID_BYTES, f"{path}.spanId")
                )
                if problem:
                    rejected.append(problem)
                    continue
                spans.append(decoded)
    return Decoded(spans, rejected)


# -- answers ----------------------------------------------------------------------------------------


def success_body(*, kind: str, rejected_spans: int = 0, error_message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse``: empty when every span was taken, else its ``partial_success``."""
    if kind == JSON:
        answer: dict[str, Any] = {}
        if rejected_spans or error_message:
            answer["partialSuccess"] = {"rejectedSpans": str(rejected_spans), "errorMessage": error_message}
        return json.dumps(answer).encode()
    response = trace_service_pb2.ExportTraceServiceResponse()
    if rejected_spans or error_message:
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = error_message
    return response.SerializeToString()


RPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    403: code_pb2.PERMISSION_DENIED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
}


def status_body(*, kind: str, http_status: int, message: str, field_path: str | None = None) -> bytes:
    """A ``google.rpc.Status`` saying why a request was refused; with a ``BadRequest`` naming the field."""
    code = RPC_CODES.get(http_status, code_pb2.UNAVAILABLE if http_status >= 500 else code_pb2.INVALID_ARGUMENT)
    if kind == JSON:
        answer: dict[str, Any] = {"code": code, "message": message}
        if field_path is not None:
            answer["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": field_path, "description": message}],
                }
            ]
        return json.dumps(answer, ensure_ascii=False).encode()
    status = status_pb2.Status(code=code, message=message)
    if field_path is not None:
        detail = error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(field=field_path, description=message)]
        )
        status.details.add().Pack(detail)
    return status.SerializeToString()
