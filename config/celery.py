import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from . import filesystem_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# filesystem:// (the default broker) writes each message whole before a worker can read it.
filesystem_broker.register()

app = Celery("repair_loop_tracer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_worker_logs(logger, **kwargs):
    """A worker replaces the root logger's handlers with its own: give them the settings' redaction filter."""
    from tracer.redaction import RedactLogFilter

    for handler in logger.handlers:
        if not any(isinstance(f, RedactLogFilter) for f in handler.filters):
            handler.addFilter(RedactLogFilter())
