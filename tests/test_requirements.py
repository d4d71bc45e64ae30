"""Declared dependencies: every third-party module the code imports is named in a requirements
``.in`` file, and the compiled locks pin what those files ask for, so a fresh clone installs what CI
tested instead of failing on an import."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"agents", "config", "tracer", "tests", "manage", "examples"}
APP_CODE = [ROOT / "agents", ROOT / "config", ROOT / "tracer", ROOT / "manage.py"]
REGENERATE = "regenerate the locks as requirements.in's header says"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def declared(path: Path) -> set[str]:
    """Project names a ``.in`` file asks for (options such as ``-r`` left out)."""
    names = set()
    for line in requirement_lines(path):
        if not line.startswith("-"):
            names.add(canonical(re.match(r"[A-Za-z0-9._-]+", line).group()))
    return names


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` for each ``name==version`` line of a compiled lock."""
    found = {}
    for line in requirement_lines(path):
        name, sep, version = line.partition("==")
        if sep:
            found[canonical(name)] = version.strip()
    return found


def python_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def third_party_imports(paths: list[Path]) -> dict[str, str]:
    """``top-level module -> a file that imports it`` for modules outside the stdlib and the project."""
    found: dict[str, str] = {}
    for file in python_files(paths):
        for node in ast.walk(ast.parse(file.read_text(), filename=str(file))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY and top != "__future__":
                    found.setdefault(top, str(file.relative_to(ROOT)))
    return found


def undeclared(imports: dict[str, str], allowed: set[str]) -> list[str]:
    providers = packages_distributions()
    problems = []
    for module, where in sorted(imports.items()):
        dists = {canonical(d) for d in providers.get(module, [])}
        if not dists:
            problems.append(f"{module} (imported by {where}) is not installed by any declared package")
        elif not dists & allowed:
            problems.append(f"{module} (imported by {where}) comes from {', '.join(sorted(dists))}, not declared")
    return problems


def test_every_module_the_app_imports_is_a_declared_runtime_dependency():
    imports = third_party_imports(APP_CODE)
    # Modules Django imports by name from settings count too (apps, middleware).
    for dotted in [*settings.INSTALLED_APPS, *settings.MIDDLEWARE]:
        top = dotted.split(".")[0]
        if top not in FIRST_PARTY:
            imports.setdefault(top, "config/settings.py")
    assert undeclared(imports, declared(ROOT / "requirements.in")) == []


def test_every_module_the_tests_import_is_a_declared_dependency():
    imports = third_party_imports([ROOT / "tests"])
    allowed = declared(ROOT / "requirements.in") | declared(ROOT / "requirements-dev.in")
    assert undeclared(imports, allowed) == []


def test_the_locks_pin_what_the_in_files_ask_for_and_the_dev_lock_repeats_the_runtime_pins():
    runtime, dev = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-dev.txt")
    assert sorted(declared(ROOT / "requirements.in") - set(runtime)) == [], f"requirements.txt: {REGENERATE}"
    assert sorted(declared(ROOT / "requirements-dev.in") - set(dev)) == [], f"requirements-dev.txt: {REGENERATE}"
    differing = {name: (version, dev.get(name)) for name, version in runtime.items() if dev.get(name) != version}
    assert differing == {}, f"requirements-dev.txt disagrees with requirements.txt: {REGENERATE}"


def test_the_requirement_files_name_no_index_or_local_path():
    for name in ("requirements.in", "requirements-dev.in", "requirements.txt", "requirements-dev.txt"):
        for line in requirement_lines(ROOT / name):
            assert line == "-r requirements.txt" or not line.startswith("-"), f"{name}: {line}"
            assert "://" not in line and "file:" not in line and " @ " not in line, f"{name}: {line}"
