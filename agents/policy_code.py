"""Policy code: the engineer's own ``fail`` and ``should_retry`` (lesson 002's ``errors.py``) run by the harness.

A policy module is a Python module that defines

- ``fail(category, message)``: the tool_result content for a failure of that category
  (``transient``, ``validation``, ``permission``, ``business``, ``fatal``) or, with ``"empty"``,
  for a call that found nothing;
- ``should_retry(error)``: whether the harness tries the same call again. The harness hands it
  ``result["error"]`` when the result ``fail`` built has one, else the whole result (lesson 002's
  harness, the one without the nested-flag bug);
- optionally ``guard(state)``: lesson 001's consecutive-error guard, called after every tool_result
  with ``state["messages"]`` holding the run's tool_results so far as ``{"role": "tool", "content":
  text}``; a string it returns stops the run with that reason. Without it the policy's
  ``consecutive_error_limit`` applies.

``RLT_POLICY_PACKS`` names such modules, comma-separated; a policy's ``code`` setting names one of
them, and then ``fail`` and ``should_retry`` replace the settings-based error format and retry rule
(``agents.loop.format_result``, ``Policy.should_retry``). A result counts as an error when it carries
``isError: true`` or an ``error``; anything else goes to the model as a success. The attempts,
backoff, guards and step limit stay the policy's settings.

``python manage.py check_policy MODULE`` runs every built-in scenario under a module and says which
of the lesson's checks hold (``agents.policy_check``).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENV_VAR = "RLT_POLICY_PACKS"
MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
REQUIRED = ("fail", "should_retry")

Json = dict[str, Any]  # what lesson 002's ``kit.api`` calls a JSON object


class PolicyCodeError(ValueError):
    """A policy module that cannot be used: not importable, not listed, or missing a function; says which."""


class PolicyCodeFailed(RuntimeError):
    """The policy module's own function raised or returned something a tool_result cannot carry."""


@dataclass(frozen=True)
class PolicyCode:
    """A loaded policy module: its functions and the SHA-256 of its source, shown with every run of it."""

    module: str
    path: str
    sha256: str
    fail_fn: Callable[[str, str], Any]
    should_retry_fn: Callable[[Any], Any]
    guard_fn: Callable[[dict[str, Any]], Any] | None

    @property
    def short_sha(self) -> str:
        return self.sha256[:12]

    def fail(self, category: str, message: str) -> Any:
        """``fail(category, message)``, checked to be JSON a tool_result can carry."""
        try:
            result = self.fail_fn(category, message)
        except Exception as exc:
            raise PolicyCodeFailed(
                f"policy code {self.module}: fail({category!r}, …) raised {type(exc).__name__}: {exc}"
            ) from exc
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise PolicyCodeFailed(
                f"policy code {self.module}: fail({category!r}, …) returned {type(result).__name__}, "
                f"which is not JSON: {exc}"
            ) from None
        return result

    def should_retry(self, result: Any) -> bool:
        """``should_retry`` handed what lesson 002's harness hands it: ``result["error"]`` when there is one."""
        error = result.get("error") if isinstance(result, dict) and isinstance(result.get("error"), dict) else result
        try:
            return bool(self.should_retry_fn(error))
        except Exception as exc:
            raise PolicyCodeFailed(
                f"policy code {self.module}: should_retry(…) raised {type(exc).__name__}: {exc}"
            ) from exc

    def guard(self, tool_results: list[str]) -> str | None:
        """The module's ``guard`` on the run's tool_results so far; None when it has none or it lets the run go on."""
        if self.guard_fn is None:
            return None
        state = {"messages": [{"role": "tool", "content": text} for text in tool_results]}
        try:
            said = self.guard_fn(state)
        except Exception as exc:
            raise PolicyCodeFailed(
                f"policy code {self.module}: guard(state) raised {type(exc).__name__}: {exc}"
            ) from exc
        return str(said) if said else None


def says_error(result: Any) -> bool:
    """Whether a result built by ``fail`` is an error: ``isError: true`` or an ``error`` in it; text is one too."""
    if isinstance(result, dict):
        return result.get("isError") is True or "error" in result
    return isinstance(result, str)


def module_paths(value: str | None = None) -> list[str]:
    """The module paths ``RLT_POLICY_PACKS`` names (or ``value``), each once, in order."""
    raw = os.environ.get(ENV_VAR, "") if value is None else value
    paths: list[str] = []
    for part in raw.split(","):
        path = part.strip()
        if not path:
            continue
        if not MODULE_PATH.match(path):
            raise PolicyCodeError(f"{ENV_VAR}: {path!r} is not a Python module path (expected e.g. mypkg.errors)")
        if path not in paths:
            paths.append(path)
    return paths


_loaded: dict[str, PolicyCode] = {}


def load_policy_code(module: str, *, listed: bool = True) -> PolicyCode:
    """Import ``module`` as a policy module. ``listed``: it must be one ``RLT_POLICY_PACKS`` names.

    ``PolicyCodeError`` names the module and what is wrong: not listed, not importable, or which of
    ``fail`` and ``should_retry`` it lacks (or does not define as a function of the right arguments).
    """
    if not isinstance(module, str) or not MODULE_PATH.match(module):
        raise PolicyCodeError(f"{module!r} is not a Python module path (expected e.g. mypkg.errors)")
    if listed and module not in module_paths():
        named = ", ".join(module_paths()) or "none"
        raise PolicyCodeError(
            f"policy module {module!r} is not named in {ENV_VAR} (it names {named}); add it there in the web "
            f"process and every worker"
        )
    if module in _loaded:
        return _loaded[module]
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # a missing module, a syntax error, an import that fails inside it
        raise PolicyCodeError(f"could not import policy module {module!r}: {type(exc).__name__}: {exc}") from exc
    missing = [name for name in REQUIRED if not callable(getattr(loaded, name, None))]
    if missing:
        raise PolicyCodeError(
            f"policy module {module!r} defines no {' and no '.join(f'{n}()' for n in missing)}; a policy module "
            f"defines fail(category, message) and should_retry(error)"
        )
    for name, arity in (("fail", 2), ("should_retry", 1), ("guard", 1)):
        fn = getattr(loaded, name, None)
        if fn is None and name == "guard":
            continue
        if not callable(fn):
            raise PolicyCodeError(f"policy module {module!r}: {name} is a {type(fn).__name__}, expected a function")
        try:
            inspect.signature(fn).bind(*range(arity))
        except TypeError:
            raise PolicyCodeError(
                f"policy module {module!r}: {name}() must take {arity} argument{'s' if arity > 1 else ''} "
                f"({'category, message' if name == 'fail' else 'error' if name == 'should_retry' else 'state'})"
            ) from None
        except ValueError:  # a builtin without a signature: take it as it is
            pass
    path = getattr(loaded, "__file__", None) or ""
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError:
        source = inspect.getsource(loaded).encode()
    code = PolicyCode(
        module=module,
        path=path,
        sha256=hashlib.sha256(source).hexdigest(),
        fail_fn=loaded.fail,
        should_retry_fn=loaded.should_retry,
        guard_fn=getattr(loaded, "guard", None),
    )
    _loaded[module] = code
    return code


def policy_code_reset() -> None:
    """Forget the loaded modules (tests that change ``RLT_POLICY_PACKS`` or write modules)."""
    _loaded.clear()


def policy_modules() -> list[str]:
    """The policy modules ``RLT_POLICY_PACKS`` names, each loaded (``PolicyCodeError`` for the first that fails)."""
    paths = module_paths()
    for path in paths:
        load_policy_code(path)
    return paths
