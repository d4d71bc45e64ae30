"""``in`` on an integer column, without the values no such column can hold.

Django leaves out of range integers out of ``exact``, ``gt`` and the like (``IntegerFieldOverflow``)
but passes them to the database in ``in``, where SQLite's driver raises OverflowError ("Python int too
large to convert to SQLite INTEGER", a 500) for any number past 64 bits: the admin's choice fields
check every id they are sent with ``pk__in``, so a group form with a permission id of 2**63 failed.
Such a value matches no row; this lookup drops it, as ``in`` drops None. Registered on IntegerField
(and so on every id column) by ``TracerConfig.ready``.
"""

from __future__ import annotations

from django.db.models.lookups import In


class IntegerIn(In):
    def process_rhs(self, compiler, connection):
        if self.rhs_is_direct_value():
            low, high = connection.ops.integer_field_range(self.lhs.output_field.get_internal_type())
            self.rhs = [
                value
                for value in self.rhs
                if not isinstance(value, int) or ((low is None or value >= low) and (high is None or value <= high))
            ]
        return super().process_rhs(compiler, connection)
