#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line
    from django.db import InterfaceError, OperationalError

    try:
        execute_from_command_line(sys.argv)
    except (OperationalError, InterfaceError) as exc:  # a database down, locked or out of disk: say so plainly
        from tracer.outage import command_failure

        sys.exit(command_failure(exc, command=" ".join(["manage.py", *sys.argv[1:2]])))
