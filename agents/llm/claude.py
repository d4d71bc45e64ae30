"""The real Claude, through the Anthropic API: ``ANTHROPIC_API_KEY``, model from ``ANTHROPIC_MODEL``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx2

from ..vocabulary import CLAUDE_DEFAULT_MODEL, ModelBackendName
from .base import ModelBackend

DEFAULT_MODEL = CLAUDE_DEFAULT_MODEL


class ClaudeBackend(ModelBackend):
    kind = ModelBackendName.CLAUDE
    real_time = True
    model_retries = 2  # as many as the SDK's default

    def __init__(
        self,
        *,
        record_to: str | Path | None = None,
        transport: httpx2.BaseTransport | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.key = env.get("ANTHROPIC_API_KEY", "").strip()
        if not self.key:
            raise ValueError(
                "the claude backend needs ANTHROPIC_API_KEY set in the environment "
                "(or use --model simulated, which runs offline)"
            )
        super().__init__(env.get("ANTHROPIC_MODEL", "").strip() or DEFAULT_MODEL, record_to=record_to)
        self.http = transport or httpx2.HTTPTransport()
        self.label = f"claude ({self.model}, Anthropic API)"

    def api_key(self) -> str:
        return self.key

    def secrets(self) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key}

    def transport(self, persona: Any) -> httpx2.BaseTransport:
        return self.http
