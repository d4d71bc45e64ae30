"""What every model backend is: an ``anthropic.Anthropic`` client and a model name for each agent.

The simulated model and a replayed cassette plug into the SDK as HTTP transports, so requests and
responses are real Messages API JSON on every path; any backend can record what it exchanged.
``agents.llm.registry`` names the backends and builds one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from ..redaction import Redactor
from ..vocabulary import ModelBackendName
from .replay import Cassette, RecordingTransport, ReplayMismatch, ReplayTransport


class ModelError(RuntimeError):
    """The model could not be reached or refused the request."""


class ModelClient:
    """One agent's connection to its model: ``create(request)`` sends Messages API JSON, returns the reply's."""

    def __init__(self, client: anthropic.Anthropic) -> None:
        self.client = client

    def create(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            message = self.client.messages.create(**request)
        except anthropic.APIConnectionError as exc:
            if isinstance(exc.__cause__, ReplayMismatch):
                raise exc.__cause__ from None
            raise ModelError(f"could not reach the model: {exc.__cause__ or exc}") from exc
        except anthropic.APIStatusError as exc:
            raise ModelError(f"the model API answered {exc.status_code}: {exc.message}") from exc
        return message.to_dict()


class ModelBackend(ABC):
    """A kind of model for one run (and its sub-agents): hands out clients, records if asked."""

    kind = ""
    label = ""
    real_time = False  # whether retries really sleep
    sdk_retries = 0  # the SDK's own retries of overloaded or rate-limited requests

    def __init__(self, model: str, *, record_to: str | Path | None = None) -> None:
        self.model = model
        self.record_to = Path(record_to) if record_to else None
        self.recording = Cassette(backend=self.kind, model=model) if self.record_to else None
        # What a cassette is redacted with: the environment's configuration and this backend's key.
        self.redactor = Redactor.from_environ(secrets=self.secrets())

    @abstractmethod
    def transport(self, persona: Any) -> httpx2.BaseTransport:
        """The HTTP transport the SDK talks through for an agent with this persona."""

    def api_key(self) -> str:
        return str(self.kind)

    def secrets(self) -> dict[str, str]:
        """Secret values this backend holds, by name (a real API key), redacted wherever they appear."""
        return {}

    def client_for(self, persona: Any) -> ModelClient:
        transport = self.transport(persona)
        if self.recording is not None:
            transport = RecordingTransport(transport, self.recording, redactor=self.redactor)
        client = anthropic.Anthropic(
            api_key=self.api_key(), http_client=httpx2.Client(transport=transport), max_retries=self.sdk_retries
        )
        return ModelClient(client)

    def close(self, **meta: Any) -> None:
        """Write the recording, if one was asked for."""
        if self.recording is not None and self.record_to is not None:
            self.recording.meta.update(meta)
            self.recording.save(self.record_to)


class ReplayBackend(ModelBackend):
    kind = ModelBackendName.REPLAY

    def __init__(self, cassette: Cassette, *, record_to: str | Path | None = None) -> None:
        super().__init__(cassette.model, record_to=record_to)
        self.cassette = cassette
        self.player = ReplayTransport(cassette, redactor=self.redactor)
        self.label = f"replay of a recorded {cassette.backend} run ({cassette.source})"

    def transport(self, persona: Any) -> httpx2.BaseTransport:
        return self.player
