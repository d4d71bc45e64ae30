"""A fake Anthropic Messages API: a real HTTP server on 127.0.0.1 that answers ``POST /v1/messages``
as the real one does, so the ``claude`` backend is tested offline, in this process, the CLI and workers.

Start it with the ``fake_api`` fixture (``tests/conftest.py``): a started server, with
``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` set in this process's environment, so the ``claude``
backend here and every subprocess started with ``subprocess_env`` (the CLI, ``WorkerProcess``) talk
to it. Without the fixture::

    with FakeMessagesAPI() as api:
        env = api.env  # {"ANTHROPIC_BASE_URL": "http://127.0.0.1:<port>", "ANTHROPIC_API_KEY": "fake-key"}

Switch behaviours per test with ``api.script(...)``: each request takes the next behaviour, in order::

    api.script(error(529), error(529), reply(text("42.")))   # overloaded twice, then an answer
    api.script(truncated_text("The value st"))               # stop_reason max_tokens
    api.script(truncated_tool_use("lookup_order"))           # a tool_use cut off by max_tokens
    api.script(refusal(), pause_turn("Searching…"), hang(30), malformed(), unknown_block())
    api.script(None, error(529))                             # None: the automatic model answers that one

Once the script is used up the server acts as a model, deterministically: a conversation with no
tool_result yet gets a tool_use of the first tool offered (its input made from the tool's schema, or
``tool_input``), and one with a tool_result gets ``answer`` as text (end_turn). So any built-in
scenario runs to its end. ``api.requests`` holds every request received (headers, parsed body).

Like the real API it answers with a ``request-id`` header and the real error shape
(``{"type": "error", "error": {"type": "overloaded_error", "message": ...}, "request_id": ...}``),
refuses a wrong key with 401 and a malformed conversation (roles that do not alternate, an empty
message, a tool_use without its tool_result right after, a tool_result for no tool_use) with 400.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAKE_KEY = "fake-key"
DEFAULT_ANSWER = "Done."

# The real API's error type for each status code.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {
    "invalid_request_error": "invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "your API key does not have permission to use the specified resource",
    "not_found_error": "the requested resource could not be found",
    "request_too_large": "request exceeds the maximum allowed number of bytes",
    "rate_limit_error": "this request would exceed your organization's rate limit",
    "api_error": "an unexpected error has occurred internal to Anthropic's systems",
    "overloaded_error": "Overloaded",
}


# -- content blocks ---------------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


_ids = itertools.count(1)


def tool_use(name: str, input: dict[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or f"toolu_fake{next(_ids):04d}", "name": name, "input": input or {}}


# -- behaviours -------------------------------------------------------------------------------------


@dataclass
class Reply:
    """A 200 with a message: ``content`` blocks and ``stop_reason`` (from the blocks when None)."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: tuple[int, int] | None = None  # (input_tokens, output_tokens); counted from the bodies when None
    stop_sequence: str | None = None


@dataclass
class Error:
    """An error response with the real body shape and the headers given (``retry-after``, ``x-should-retry``)."""

    status: int
    type: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Wait ``seconds`` before answering with ``then`` (the automatic model when None); a client that
    gives up first finds the connection answered by nobody."""

    seconds: float
    then: Reply | Error | None = None


@dataclass
class Malformed:
    """A response whose body is not the JSON it says it is."""

    body: bytes = b'{"id": "msg_fake", "type": "message", "content": [{"type": "te'
    status: int = 200


# None in a script: the automatic model answers that request.
Behaviour = Reply | Error | Hang | Malformed | Callable[[dict[str, Any]], "Reply | Error | Hang | Malformed"] | None


def reply(*blocks: dict[str, Any], stop_reason: str | None = None, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(list(blocks), stop_reason, usage)


def error(
    status: int,
    message: str | None = None,
    *,
    type: str | None = None,
    retry_after: float | None = None,
    should_retry: bool | None = None,
) -> Error:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    return Error(status, type, message, headers)


def hang(seconds: float, then: Reply | Error | None = None) -> Hang:
    return Hang(seconds, then)


def malformed(body: bytes | None = None) -> Malformed:
    return Malformed(body) if body is not None else Malformed()


def truncated_text(value: str = "The value st") -> Reply:
    """Text cut off by ``max_tokens``."""
    return Reply([text(value)], "max_tokens")


def truncated_tool_use(name: str, *, said: str | None = None) -> Reply:
    """A tool_use cut off by ``max_tokens`` while its input was written: the API returns the block with
    the input it had parsed so far, here nothing (``{}``)."""
    blocks = ([text(said)] if said else []) + [tool_use(name, {})]
    return Reply(blocks, "max_tokens")


def refusal(said: str = "") -> Reply:
    """The model declined (``stop_reason: refusal``), with whatever text it wrote before (often none)."""
    return Reply([text(said)] if said else [], "refusal")


def pause_turn(said: str = "Let me keep looking.") -> Reply:
    """A long turn paused by the API (``pause_turn``): the client sends the content back to continue."""
    return Reply([text(said)], "pause_turn")


def unknown_block(kind: str = "mystery_block", *, then: str = DEFAULT_ANSWER) -> Reply:
    """A content block of a type this SDK version does not know, followed by a text answer."""
    return Reply([{"type": kind, "payload": {"note": "from a newer API"}}, text(then)], "end_turn")


# -- the server -------------------------------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON, or None when it was not JSON
    answered: int | None = None  # the status code it got (None while it hangs)


def value_for(schema: dict[str, Any]) -> Any:
    """A value that fits a JSON schema, simply: default, example, first enum value, or by type."""
    if not isinstance(schema, dict):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return value_for(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: value_for(props.get(name, {})) for name in schema.get("required") or []}
    return {"string": "x", "integer": 1, "number": 1, "boolean": False, "array": [], "null": None}.get(kind, "x")


def conversation_problem(body: Any) -> str | None:
    """What the real API would refuse in this request with a 400, in its words; None when it is fine."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    for n, message in enumerate(messages):
        if n and message.get("role") == messages[n - 1].get("role"):
            return 'messages: roles must alternate between "user" and "assistant"'
        content = message.get("content")
        final_assistant = n == len(messages) - 1 and message.get("role") == "assistant"
        if not content and not final_assistant:
            return (
                f"messages.{n}: all messages must have non-empty content except for the optional final "
                "assistant message"
            )
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            following = messages[n + 1]["content"] if n + 1 < len(messages) else None
            if uses and following is not None:
                answered = (
                    {b.get("tool_use_id") for b in following if isinstance(b, dict)}
                    if isinstance(following, list)
                    else set()
                )
                missing = [u for u in uses if u not in answered]
                if missing:
                    return (
                        f"messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message."
                    )
        else:
            asked = set()
            if n:
                previous = messages[n - 1].get("content")
                if isinstance(previous, list):
                    asked = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for k, b in enumerate(blocks):
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") not in asked:
                    return (
                        f"messages.{n}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message."
                    )
    return None


class FakeMessagesAPI:
    """The server: ``start()``/``stop()`` (or a ``with`` block), ``script(...)``, ``requests``, ``env``."""

    def __init__(self, *, answer: str = DEFAULT_ANSWER, tool_input: dict[str, Any] | None = None) -> None:
        self.answer = answer
        self.tool_input = tool_input
        self.key = FAKE_KEY
        self.model = "claude-haiku-4-5"
        self.requests: list[Received] = []
        self._script: list[Behaviour] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._count = itertools.count(1)

    # -- control --

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake API first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to talk to this server with the ``claude`` backend."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": self.key}

    def script(self, *behaviours: Behaviour) -> FakeMessagesAPI:
        """Queue behaviours: each request takes the next one; after them, the automatic model answers."""
        with self._lock:
            self._script.extend(behaviours)
        return self

    def bodies(self) -> list[Any]:
        """The JSON bodies of the ``/v1/messages`` requests received so far."""
        return [r.body for r in self.requests if r.path == "/v1/messages"]

    def start(self) -> FakeMessagesAPI:
        api = self

        class Handler(_Handler):
            fake = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-messages-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # hanging requests give up at once
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering --

    def next_behaviour(self, body: dict[str, Any]) -> Reply | Error | Hang | Malformed:
        with self._lock:
            behaviour = self._script.pop(0) if self._script else None
        if behaviour is None:
            return self.auto(body)
        return behaviour(body) if callable(behaviour) else behaviour

    def auto(self, body: dict[str, Any]) -> Reply:
        """The automatic model: the first tool once, then ``answer``."""
        messages = body.get("messages") or []
        has_result = any(
            isinstance(b, dict) and b.get("type") == "tool_result"
            for m in messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
        )
        tools = body.get("tools") or []
        if tools and not has_result:
            first = tools[0]
            chosen = self.tool_input if self.tool_input is not None else value_for(first.get("input_schema") or {})
            return Reply([tool_use(first["name"], chosen)], "tool_use")
        return Reply([text(self.answer)], "end_turn")

    def message(self, body: dict[str, Any], answer: Reply, number: int) -> dict[str, Any]:
        stop_reason = answer.stop_reason or (
            "tool_use" if any(b.get("type") == "tool_use" for b in answer.content) else "end_turn"
        )
        usage = answer.usage or (
            max(1, len(json.dumps(body)) // 4),
            max(1, len(json.dumps(answer.content)) // 4),
        )
        return {
            "id": f"msg_fake{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": answer.content,
            "stop_reason": stop_reason,
            "stop_sequence": answer.stop_sequence,
            "usage": {
                "input_tokens": usage[0],
                "output_tokens": usage[1],
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "service_tier": "standard",
            },
        }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeMessagesAPI
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's client expects

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read ``requests``
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str], request_id: str) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.send_header("request-id", request_id)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            self.close_connection = True

    def _error(
        self,
        received: Received,
        status: int,
        request_id: str,
        *,
        type: str | None = None,
        message: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        kind = type or ERROR_TYPES.get(status, "api_error")
        body = {
            "type": "error",
            "error": {"type": kind, "message": message or ERROR_MESSAGES.get(kind, kind)},
            "request_id": request_id,
        }
        received.answered = status
        self._send(status, json.dumps(body).encode(), headers or {}, request_id)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        fake = self.fake
        number = next(fake._count)
        request_id = f"req_fake{number:06d}"
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        received = Received(self.command, self.path.split("?")[0], headers, body)
        with fake._lock:
            fake.requests.append(received)
        if received.method != "POST" or received.path != "/v1/messages":
            self._error(received, 404, request_id, message=f"Not Found: {received.method} {received.path}")
            return
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if fake.key not in (headers.get("x-api-key"), bearer):
            self._error(received, 401, request_id)
            return
        problem = "request body is not valid JSON" if body is None else conversation_problem(body)
        if problem:
            self._error(received, 400, request_id, message=problem)
            return
        behaviour = fake.next_behaviour(body)
        if isinstance(behaviour, Hang):
            if fake._stopping.wait(behaviour.seconds):
                self.close_connection = True
                return
            behaviour = behaviour.then or fake.auto(body)
        if isinstance(behaviour, Error):
            self._error(
                received,
                behaviour.status,
                request_id,
                type=behaviour.type,
                message=behaviour.message,
                headers=behaviour.headers,
            )
        elif isinstance(behaviour, Malformed):
            received.answered = behaviour.status
            self._send(behaviour.status, behaviour.body, {}, request_id)
        else:
            received.answered = 200
            self._send(200, json.dumps(fake.message(body, behaviour, number)).encode(), {}, request_id)
