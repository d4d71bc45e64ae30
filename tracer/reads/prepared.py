"""Queries whose SQL Django compiles once per process, then asked with each request's values.

A page's fixed reads (a run by its id with its experiment and review, its sub-agents, its findings)
cost Django more CPU to build and compile, request after request, than the database takes to run
them. ``Prepared`` compiles the queryset its ``build`` returns once per database and shape, with a
marker in place of each value, and each call runs that SQL with the call's values, turning the rows
into what the queryset itself would give: model instances with their ``select_related`` objects
and annotations, or ``values_list`` tuples (flat or not). Prefetches are not supported.

A value is a whole number or a list of them (an ``__in``): the SQL of each length of list is compiled
once, up to ``LIST_MAX``. A value its parameter cannot hold (beyond 64 bits; on PostgreSQL, beyond the
column's integer type, which Django's parameters name) is asked through the queryset itself, which
answers it as Django does (an id too large matches nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesListIterable, get_related_populators

# Markers stand in for the values while the SQL is compiled: whole numbers within every integer
# column's range (Django checks a value against its column's before it compiles a lookup), and far
# from any constant a query here holds.
_MARKER_BASE = 2_147_000_000
_INT64 = range(-(2**63), 2**63)
# What each of psycopg's integer parameters holds (Django names a column's type by them on PostgreSQL).
_INT_RANGES = {"Int2": range(-(2**15), 2**15), "Int4": range(-(2**31), 2**31), "Int8": _INT64}
# The longest list whose SQL is kept (one for each length up to it); a longer one is compiled each call.
LIST_MAX = 64


@dataclass
class _Compiled:
    sql: str
    params: list
    slots: list[tuple[int, str, int | None]]  # (position in params, value's name, index in its list)
    converters: list  # (position in the row, its converters, its expression)
    shape: str  # "models", "tuples" or "flat"
    model: Any = None
    init_list: list[str] | None = None
    fields_start: int = 0
    fields_end: int = 0
    populators: list | None = None
    annotations: dict[str, int] | None = None
    col_count: int = 0


class Prepared:
    """``build(**values)`` returns a queryset of the values; ``prepared(**values)`` its results as a list."""

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self._compiled: dict[tuple, tuple[_Compiled, str]] = {}

    def __call__(self, **values: int | list[int]) -> list:
        if any(isinstance(v, list | tuple) and len(v) > LIST_MAX for v in values.values()):
            return list(self.build(**values))  # a long list: compiled for this call alone
        given = {}
        for name, value in values.items():
            items = list(dict.fromkeys(value)) if isinstance(value, list | tuple) else [value]
            if any(isinstance(v, bool) or not isinstance(v, int) for v in items):
                raise TypeError(f"{name}: whole numbers only, got {value!r}")
            if not items:
                return []
            given[name] = items if isinstance(value, list | tuple) else items[0]
        key = tuple(sorted((name, len(v) if isinstance(v, list) else None) for name, v in given.items()))
        compiled, alias = self._compiled_for(key)
        params = list(compiled.params)
        for position, name, index in compiled.slots:
            value = given[name] if index is None else given[name][index]
            kind = type(params[position])
            if value not in _INT_RANGES.get(kind.__name__, _INT64):
                return list(self.build(**values))
            params[position] = value if kind is int else kind(value)
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if compiled.converters or compiled.shape == "models":
            rows = [list(row) for row in rows]
            for row in rows:
                for position, convs, expression in compiled.converters:
                    value = row[position]
                    for converter in convs:
                        value = converter(value, expression, connection)
                    row[position] = value
        if compiled.shape == "flat":
            return [row[0] for row in rows]
        if compiled.shape == "tuples":
            return [tuple(row[: compiled.col_count]) for row in rows]
        return [self._instance(compiled, alias, row) for row in rows]

    def _compiled_for(self, key: tuple) -> tuple[_Compiled, str]:
        found = self._compiled.get(key)
        if found is None:  # two threads may both compile it: the same SQL either way
            found = self._compiled[key] = self._compile(key)
        return found

    def _compile(self, key: tuple) -> tuple[_Compiled, str]:
        markers, names, n = {}, {}, 0
        for name, length in key:
            if length is None:
                markers[name], names[_MARKER_BASE + n] = _MARKER_BASE + n, (name, None)
                n += 1
            else:
                markers[name] = [_MARKER_BASE + n + i for i in range(length)]
                names.update({_MARKER_BASE + n + i: (name, i) for i in range(length)})
                n += length
        queryset = self.build(**markers)
        if queryset._prefetch_related_lookups or queryset._known_related_objects:
            raise TypeError("a prepared query reads no prefetches and no related manager's objects")
        shapes = {ModelIterable: "models", ValuesListIterable: "tuples", FlatValuesListIterable: "flat"}
        if queryset._iterable_class not in shapes:
            raise TypeError(f"a prepared query gives models or values_list tuples, not {queryset._iterable_class}")
        alias = queryset.db
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        params = list(params)
        slots = [(i, *names[p]) for i, p in enumerate(params) if isinstance(p, int) and p in names]
        if sorted(params[i] for i, _, _ in slots) != sorted(names):
            raise ValueError(f"each value must be one parameter of the SQL, once: {sorted(names)} in {params}")
        fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
        converters = [
            (position, convs, expression) for position, (convs, expression) in compiler.get_converters(fields).items()
        ]
        compiled = _Compiled(
            sql=sql,
            params=params,
            slots=slots,
            converters=converters,
            shape=shapes[queryset._iterable_class],
            col_count=compiler.col_count,
        )
        if compiled.shape == "models":
            info = compiler.klass_info
            compiled.model = info["model"]
            compiled.fields_start, compiled.fields_end = info["select_fields"][0], info["select_fields"][-1] + 1
            compiled.init_list = [
                f[0].target.attname for f in compiler.select[compiled.fields_start : compiled.fields_end]
            ]
            compiled.populators = get_related_populators(info, compiler.select, alias)
            compiled.annotations = dict(compiler.annotation_col_map or {})
        return compiled, alias

    @staticmethod
    def _instance(compiled: _Compiled, alias: str, row: list) -> Any:
        obj = compiled.model.from_db(alias, compiled.init_list, row[compiled.fields_start : compiled.fields_end])
        for populator in compiled.populators:
            populator.populate(row, obj)
        for name, position in compiled.annotations.items():
            setattr(obj, name, row[position])
        return obj
