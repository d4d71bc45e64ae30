"""Settings refuse to start without a secret key when DEBUG is off, and still start in development."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def load_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"DJANGO_DEBUG", "DJANGO_SECRET_KEY"}}
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env={**base, "RLT_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_debug_off_without_a_secret_key_refuses_to_start_and_says_what_to_set(tmp_path):
    result = load_settings(tmp_path, DJANGO_DEBUG="0")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY is not set" in result.stderr


def test_debug_off_with_a_secret_key_starts(tmp_path):
    result = load_settings(tmp_path, DJANGO_DEBUG="0", DJANGO_SECRET_KEY="a-key-from-the-environment")
    assert result.returncode == 0, result.stderr


def test_development_starts_without_a_secret_key(tmp_path):
    result = load_settings(tmp_path)
    assert result.returncode == 0, result.stderr
