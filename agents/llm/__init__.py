"""Model backends. Every one is reached through the official ``anthropic`` SDK (imported only here)."""

from .base import MODEL_BACKENDS, ModelBackend, ModelClient, ModelError, make_backend

__all__ = ["MODEL_BACKENDS", "ModelBackend", "ModelClient", "ModelError", "make_backend"]
