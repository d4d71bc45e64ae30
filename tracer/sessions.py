"""Sessions in the database, as Django's ``db`` backend keeps them, read in one plain query.

Every page reads its session first; Django's backend reads it through the ORM, whose query costs more
to build than it takes to run (``SESSION_ENGINE``). Writing, expiring and flushing a session are
Django's own, unchanged.
"""

from __future__ import annotations

from functools import cache

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.db import connections, router
from django.utils import timezone


class SessionStore(DatabaseSessionStore):
    def load(self) -> dict:
        """The session's data if it exists and has not expired, else an empty session with no key
        (what Django's backend does)."""
        data = self._session_data_read() if self.session_key else None
        if data is None:
            self._session_key = None
            return {}
        return self.decode(data)

    def _session_data_read(self) -> str | None:
        connection = connections[router.db_for_read(self.model)]
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        with connection.cursor() as cursor:
            cursor.execute(_session_sql(), [self.session_key, now])
            row = cursor.fetchone()
        return None if row is None else row[0]


@cache
def _session_sql() -> str:
    """The query of a session's data by key, unexpired, on the session model's table (quoted as SQL
    quotes names, which SQLite and PostgreSQL both take)."""
    from django.contrib.sessions.models import Session

    fields = {name: Session._meta.get_field(name).column for name in ("session_key", "session_data", "expire_date")}
    table = Session._meta.db_table
    return (
        f'SELECT "{fields["session_data"]}" FROM "{table}" '
        f'WHERE "{fields["session_key"]}" = %s AND "{fields["expire_date"]}" > %s'
    )
