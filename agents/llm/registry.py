"""The model backend registry: a builder for each ``ModelBackendName``, and ``make_backend`` by name.

Importing this module loads no SDK: each builder imports its backend (and with it the ``anthropic``
SDK) when it is called.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..vocabulary import ModelBackendName

if TYPE_CHECKING:
    import httpx2

    from .base import ModelBackend


def _simulated(*, cassette: str | Path | None, record_to: str | Path | None, transport: object) -> ModelBackend:
    from .simulated import SimulatedBackend

    return SimulatedBackend(record_to=record_to)


def _claude(
    *, cassette: str | Path | None, record_to: str | Path | None, transport: httpx2.BaseTransport | None
) -> ModelBackend:
    from .claude import ClaudeBackend

    return ClaudeBackend(record_to=record_to, transport=transport)


def _replay(*, cassette: str | Path | None, record_to: str | Path | None, transport: object) -> ModelBackend:
    if not cassette:
        raise ValueError("the replay backend needs a cassette: pass cassette=<path to a recorded .json file>")
    from .base import ReplayBackend
    from .replay import Cassette

    return ReplayBackend(Cassette.load(cassette), record_to=record_to)


BUILDERS: dict[ModelBackendName, Callable[..., ModelBackend]] = {
    ModelBackendName.SIMULATED: _simulated,
    ModelBackendName.CLAUDE: _claude,
    ModelBackendName.REPLAY: _replay,
}


def make_backend(
    kind: str,
    *,
    cassette: str | Path | None = None,
    record_to: str | Path | None = None,
    transport: httpx2.BaseTransport | None = None,
) -> ModelBackend:
    """Build the backend named ``kind``. ``transport`` replaces the network for the claude backend (tests)."""
    build = BUILDERS.get(kind)  # a plain str finds its StrEnum key: equal, same hash
    if build is None:
        raise ValueError(f"unknown model backend {kind!r}; expected one of {', '.join(ModelBackendName)}")
    return build(cassette=cassette, record_to=record_to, transport=transport)
