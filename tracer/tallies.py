"""The policy matrix's tallies kept by the database: triggers on ``tracer_run`` keep ``MatrixTally`` in
step with every insert, update and delete, whoever writes (the recorder's bulk inserts and COPY, the
ORM's ``update()``, retention's deletes), so the matrix and the experiment page read a few rows per
scenario, policy, backend and experiment instead of summing every run.

A run counts once it has finished, is a top-level run and has a scenario (``reads.matrix.matrix_scope``
without its narrowing); what it adds is ``SUMS``, the same figures ``reads.matrix.matrix_groups`` sums
with the ORM (a test holds the two equal). Passes and unjudged runs (no verdict) here are the judge's: a
reviewer's override and a re-run standing in for an interrupted run are applied by the matrix as it
reads (few rows, indexed).

- **SQLite**: row triggers, each guarded by a ``WHEN`` so that an update of a running run (the
  recorder's counters, a step at a time) does nothing.
- **PostgreSQL**: statement triggers over the statement's transition tables, which add each
  statement's changes per key in key order: one upsert per statement, its rows locked in one order,
  so two writers inserting many runs of the same keys at once wait for each other instead of
  deadlocking.

``tallies_install`` (re)creates the triggers and rebuilds the table from the runs. The app calls it
after every ``migrate`` when the triggers are missing or differ from ``SUMS`` (an SQLite migration that
rebuilds ``tracer_run`` drops its triggers; a change to ``SUMS`` changes their text): editing ``SUMS``
and adding the column is all a new figure needs.
"""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .models import MatrixTally, Run

TABLE = MatrixTally._meta.db_table
RUNS = Run._meta.db_table
KEYS = ("scenario", "policy_name", "model_backend", "experiment")
TRIGGER = "tracer_run_tally"  # name prefix of the triggers (and of PostgreSQL's function)


def _q(value: str) -> str:
    """A fixed string as an SQL literal (the choices' values below; never user input)."""
    return "'" + value.replace("'", "''") + "'"


def _when(condition: str) -> str:
    return f"CASE WHEN {condition} THEN 1 ELSE 0 END"


def _key_sql(x: str) -> list[str]:
    return [f"{x}.scenario", f"{x}.policy_name", f"{x}.model_backend", f"COALESCE({x}.experiment_id, 0)"]


def _counted(x: str) -> str:
    return f"({x}.status = {_q(Run.Status.FINISHED)} AND {x}.parent_id IS NULL AND {x}.scenario <> '')"


def _duration_us(x: str, vendor: str) -> str:
    """The run's duration as every page gives it (``Run.measured_ms``), in whole microseconds."""
    integer = "BIGINT" if vendor == "postgresql" else "INTEGER"
    return f"CAST(ROUND({x}.measured_ms * 1000) AS {integer})"


def _stop(x: str, reason: str) -> str:
    return _when(f"{x}.stop_reason = {_q(reason)}")


# What one counted run adds to its row: column -> SQL over the run's row ``x`` on ``vendor``.
SUMS = {
    "runs": lambda x, v: "1",
    "passes": lambda x, v: _when(f"{x}.verdict = {_q(Run.Verdict.PASS)}"),
    "unjudged": lambda x, v: _when(f"{x}.verdict NOT IN ({', '.join(map(_q, Run.Verdict.values))})"),
    "tool_calls": lambda x, v: f"{x}.tool_call_count",
    "retries": lambda x, v: f"{x}.retry_count",
    "wasted_retries": lambda x, v: f"{x}.wasted_retry_count",
    "model_retries": lambda x, v: f"{x}.model_retry_count",
    "guard_stops": lambda x, v: _stop(x, Run.StopReason.CONSECUTIVE_ERRORS),
    "max_steps_stops": lambda x, v: _stop(x, Run.StopReason.MAX_STEPS),
    "cut_off": lambda x, v: _stop(x, Run.StopReason.MAX_TOKENS),
    "refusals": lambda x, v: _stop(x, Run.StopReason.REFUSAL),
    "crashes": lambda x, v: _stop(x, Run.StopReason.CRASHED),
    "interrupted": lambda x, v: _stop(x, Run.StopReason.INTERRUPTED),
    "imported": lambda x, v: _when(f"{x}.source <> {_q(Run.Source.AGENT)}"),
    "tokens": lambda x, v: f"({x}.input_tokens + {x}.output_tokens)",
    "duration_us": lambda x, v: _duration_us(x, v),
    "timed": lambda x, v: _when(f"{x}.measured_ms > 0"),
}
# The run's columns that decide whether and what it counts: an update touching none of them changes nothing.
READ_COLUMNS = (
    "status",
    "parent_id",
    "scenario",
    "policy_name",
    "model_backend",
    "experiment_id",
    "verdict",
    "tool_call_count",
    "retry_count",
    "wasted_retry_count",
    "model_retry_count",
    "stop_reason",
    "source",
    "input_tokens",
    "output_tokens",
    "measured_ms",
)


def _upsert_tail() -> str:
    sets = ", ".join(f"{c} = {TABLE}.{c} + excluded.{c}" for c in SUMS)
    return f"ON CONFLICT ({', '.join(KEYS)}) DO UPDATE SET {sets}"


def _columns() -> str:
    return ", ".join((*KEYS, *SUMS))


def _sqlite_triggers() -> list[str]:
    def adds(x: str) -> str:
        return ", ".join((*_key_sql(x), *(f(x, "sqlite") for f in SUMS.values())))

    def take_back(x: str) -> str:
        sets = ", ".join(f"{c} = {c} - ({f(x, 'sqlite')})" for c, f in SUMS.items())
        where = " AND ".join(f"{k} = {e}" for k, e in zip(KEYS, _key_sql(x), strict=True))
        return f"UPDATE {TABLE} SET {sets} WHERE {where}"

    changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in READ_COLUMNS)
    return [
        f"CREATE TRIGGER {TRIGGER}_insert AFTER INSERT ON {RUNS} WHEN {_counted('NEW')} BEGIN "
        f"INSERT INTO {TABLE} ({_columns()}) VALUES ({adds('NEW')}) {_upsert_tail()}; END",
        f"CREATE TRIGGER {TRIGGER}_delete AFTER DELETE ON {RUNS} WHEN {_counted('OLD')} BEGIN {take_back('OLD')}; END",
        f"CREATE TRIGGER {TRIGGER}_update AFTER UPDATE ON {RUNS} "
        f"WHEN ({_counted('OLD')} OR {_counted('NEW')}) AND ({changed}) BEGIN "
        f"{take_back('OLD')} AND {_counted('OLD')}; "
        f"INSERT INTO {TABLE} ({_columns()}) SELECT {adds('NEW')} WHERE {_counted('NEW')} {_upsert_tail()}; END",
    ]


def _postgresql_triggers() -> list[str]:
    def rows(x: str, table: str, sign: str, join: str = "") -> str:
        sums = ", ".join(f"{sign}({f(x, 'postgresql')}) AS {c}" for c, f in SUMS.items())
        keys = ", ".join(f"{e} AS {k}" for k, e in zip(KEYS, _key_sql(x), strict=True))
        return f"SELECT {keys}, {sums} FROM {table} {x} {join} WHERE {_counted(x)}"

    def apply(*parts: str) -> str:
        sums = ", ".join(f"SUM({c})" for c in SUMS)
        keys = ", ".join(KEYS)
        return (
            f"INSERT INTO {TABLE} ({_columns()}) SELECT {keys}, {sums} FROM ({' UNION ALL '.join(parts)}) d "
            f"GROUP BY {keys} ORDER BY {keys} {_upsert_tail()};"
        )

    old_cols = ", ".join(f"o.{c}" for c in READ_COLUMNS)
    new_cols = ", ".join(f"n.{c}" for c in READ_COLUMNS)
    changed = f" AND ROW({old_cols}) IS DISTINCT FROM ROW({new_cols})"
    added = rows("n", "new_rows", "", "JOIN old_rows o ON o.id = n.id") + changed
    taken_back = rows("o", "old_rows", "-", "JOIN new_rows n ON n.id = o.id") + changed
    function = (
        f"CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP = 'INSERT' THEN {apply(rows('n', 'new_rows', ''))} "
        f"ELSIF TG_OP = 'DELETE' THEN {apply(rows('o', 'old_rows', '-'))} "
        f"ELSE {apply(added, taken_back)} "
        f"END IF; RETURN NULL; END $$"
    )
    referencing = {
        "insert": "REFERENCING NEW TABLE AS new_rows",
        "delete": "REFERENCING OLD TABLE AS old_rows",
        "update": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    }
    return [function] + [
        f"CREATE TRIGGER {TRIGGER}_{op} AFTER {op.upper()} ON {RUNS} {ref} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()"
        for op, ref in referencing.items()
    ]


def _statements(vendor: str) -> list[str]:
    return _postgresql_triggers() if vendor == "postgresql" else _sqlite_triggers()


def definition_mark(vendor: str) -> str:
    """A short hash of this version's triggers, written into them so an outdated set is recognised."""
    return "tally " + hashlib.sha256("\n".join(_statements(vendor)).encode()).hexdigest()[:12]


def _marked(vendor: str) -> list[str]:
    """The statements with the mark in a comment inside each trigger's text (and the function's)."""
    mark = definition_mark(vendor)
    if vendor == "postgresql":
        return [s.replace("$$ BEGIN ", f"$$ BEGIN /* {mark} */ ", 1) for s in _statements(vendor)]
    return [s.replace(" BEGIN ", f" BEGIN /* {mark} */ ", 1) for s in _statements(vendor)]


def tallies_drop(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for op in ("insert", "update", "delete"):
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_{op} ON {RUNS}")
            else:
                cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_{op}")
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}()")


def tallies_current(connection: BaseDatabaseWrapper) -> bool:
    """Whether this database's triggers are the three of this version."""
    mark = definition_mark(connection.vendor)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT COUNT(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
                "WHERE t.tgname LIKE %s AND p.prosrc LIKE %s",
                [f"{TRIGGER}_%", f"%{mark}%"],
            )
        else:
            cursor.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s AND sql LIKE %s",
                [f"{TRIGGER}_%", f"%{mark}%"],
            )
        return cursor.fetchone()[0] == 3


def tallies_install(connection: BaseDatabaseWrapper) -> None:
    """Create this version's triggers and rebuild the tallies from the runs, in one transaction."""
    vendor = connection.vendor
    sums = ", ".join(f"SUM({f('r', vendor)})" for f in SUMS.values())
    keys = ", ".join(_key_sql("r"))
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        tallies_drop(connection)
        for statement in _marked(vendor):
            cursor.execute(statement)
        cursor.execute(f"DELETE FROM {TABLE}")
        cursor.execute(
            f"INSERT INTO {TABLE} ({_columns()}) SELECT {keys}, {sums} FROM {RUNS} r "
            f"WHERE {_counted('r')} GROUP BY {keys}"
        )


def tallies_ensure(*, using: str, **kwargs) -> None:
    """After ``migrate``: install the triggers when they are missing or outdated (and the table exists)."""
    from django.db import connections

    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql"):
        return
    if TABLE not in connection.introspection.table_names() or tallies_current(connection):
        return
    tallies_install(connection)
