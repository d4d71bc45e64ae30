"""The one rule for names that become the policy matrix's rows and columns: a policy variant's name, and
the policy label and scenario key a run from outside carries. Lowercase letters, digits, ``-`` and ``_``,
starting with a letter or digit, up to the column's length."""

from __future__ import annotations

import re

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
POLICY_NAME_MAX = 40  # a variant's name and a policy label (Run.policy_name)
SCENARIO_KEY_MAX = 100  # Run.scenario
CHARACTERS = "lowercase letters, digits, - and _, starting with a letter or digit"


def name_problem(value: str, *, limit: int) -> str:
    """What is wrong with ``value`` as such a name, saying what is expected; "" when nothing is."""
    expected = f"expected {CHARACTERS}, at most {limit} characters"
    if len(value) > limit:
        return f"{expected}; got {len(value)} characters"
    if not re.fullmatch(NAME_PATTERN, value):
        shown = repr(value) if len(value) <= 60 else repr(value[:59] + "…")
        return f"{expected}; got {shown}"
    return ""


def name_checked(value: str, *, limit: int) -> str:
    """``value`` when it is blank or such a name; else ``ValueError`` saying what is expected."""
    problem = name_problem(value, limit=limit) if value else ""
    if problem:
        raise ValueError(problem)
    return value
