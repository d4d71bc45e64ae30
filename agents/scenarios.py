"""The scenario registry: the lessons' pack first, then every pack ``RLT_SCENARIO_PACKS`` names.

``RLT_SCENARIO_PACKS`` is a comma-separated list of Python module paths (``mypkg.pack,other.pack``),
each defining ``PACK = Pack(...)`` (``agents.packs``, docs/packs.md). The registry is loaded once
per process, on first use. A module that cannot be imported, defines no ``PACK``, or repeats a pack
or scenario name already loaded is a ``PackError`` naming the module: the web process and the
workers load the registry when Django starts (``tracer.apps``), so they refuse to start with it
rather than fail mid-run; ``python -m agents`` prints it and exits 2.

Listing names is cheap: loading the registry imports the pack modules (Pydantic models and plain
functions), never the agent loop or the ``anthropic`` SDK.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .packs import Pack, PackError, Scenario

ENV_VAR = "RLT_SCENARIO_PACKS"
BUILTIN = "agents.lessons"
MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")

__all__ = [
    "ENV_VAR",
    "LoadedPack",
    "PackError",
    "Registry",
    "get_scenario",
    "registry",
    "registry_load",
    "registry_reset",
    "registry_use",
    "scenario_groups",
    "scenario_names",
]


@dataclass(frozen=True)
class LoadedPack:
    pack: Pack
    module: str

    @property
    def name(self) -> str:
        return self.pack.name

    @property
    def title(self) -> str:
        return self.pack.title

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        return tuple(self.pack.scenarios)


@dataclass(frozen=True)
class Registry:
    packs: tuple[LoadedPack, ...]
    scenarios: dict[str, Scenario]
    pack_of: dict[str, LoadedPack]


def module_paths(value: str) -> list[str]:
    """The module paths in an ``RLT_SCENARIO_PACKS`` value, each once, in order."""
    paths: list[str] = []
    for part in (value or "").split(","):
        path = part.strip()
        if not path:
            continue
        if not MODULE_PATH.match(path):
            raise PackError(f"{ENV_VAR}: {path!r} is not a Python module path (expected e.g. mypkg.pack)")
        if path not in paths:
            paths.append(path)
    return paths


def load_pack(module: str) -> Pack:
    """Import ``module`` and return its ``PACK``; ``PackError`` naming the module when that fails."""
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # a missing module, a syntax error, a bad Scenario(...) at import: all named
        raise PackError(f"{ENV_VAR}: could not import {module!r}: {type(exc).__name__}: {exc}") from exc
    pack = getattr(loaded, "PACK", None)
    if pack is None:
        raise PackError(f"{ENV_VAR}: module {module!r} defines no PACK; a pack module sets PACK = Pack(...)")
    if not isinstance(pack, Pack):
        raise PackError(f"{ENV_VAR}: module {module!r}: PACK is a {type(pack).__name__}, expected an agents.packs.Pack")
    return pack


def registry_load(packs: str | None = None) -> Registry:
    """A registry of the lessons' pack and the pack modules in ``packs`` (default: ``RLT_SCENARIO_PACKS``)."""
    value = os.environ.get(ENV_VAR, "") if packs is None else packs
    loaded: list[LoadedPack] = []
    scenarios: dict[str, Scenario] = {}
    pack_of: dict[str, LoadedPack] = {}
    for module in [BUILTIN, *(m for m in module_paths(value) if m != BUILTIN)]:
        entry = LoadedPack(load_pack(module), module)
        for earlier in loaded:
            if earlier.name == entry.name:
                raise PackError(
                    f"{ENV_VAR}: pack {entry.name!r} in module {module!r} has the name of the pack in module "
                    f"{earlier.module!r}; rename one of them"
                )
        for scenario in entry.scenarios:
            if scenario.name in scenarios:
                other = pack_of[scenario.name]
                raise PackError(
                    f"{ENV_VAR}: scenario {scenario.name!r} of pack {entry.name!r} (module {module!r}) is already "
                    f"defined by pack {other.name!r} (module {other.module!r}); rename one of them"
                )
            scenarios[scenario.name] = scenario
            pack_of[scenario.name] = entry
        loaded.append(entry)
    return Registry(tuple(loaded), scenarios, pack_of)


_current: Registry | None = None


def registry() -> Registry:
    """This process's registry, loaded from the environment on first use."""
    global _current
    if _current is None:
        _current = registry_load()
    return _current


def registry_reset() -> None:
    """Forget the loaded registry: the next use loads it from the environment again."""
    global _current
    _current = None


@contextmanager
def registry_use(replacement: Registry) -> Iterator[Registry]:
    """Use ``replacement`` as this process's registry inside the block (tests)."""
    global _current
    before, _current = _current, replacement
    try:
        yield replacement
    finally:
        _current = before


def scenario_names() -> list[str]:
    return list(registry().scenarios)


def scenario_groups() -> list[LoadedPack]:
    """The packs in order, each with its scenarios: what the launch page groups its choices by."""
    return list(registry().packs)


def get_scenario(name: str) -> Scenario:
    found = registry().scenarios.get(name)
    if found is None:
        raise ValueError(
            f"unknown scenario {name!r}; expected one of {', '.join(registry().scenarios)} (a pack's scenarios are "
            f"known only where {ENV_VAR} names its module: in the web process and in every worker)"
        )
    return found
