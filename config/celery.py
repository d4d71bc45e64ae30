import os

from celery import Celery, bootsteps
from celery.bin.base import CeleryOption
from celery.signals import after_setup_logger, after_setup_task_logger

from . import filesystem_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# filesystem:// (the default broker) writes each message whole before a worker can read it.
filesystem_broker.register()

app = Celery("repair_loop_tracer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class BeatThread(bootsteps.StartStopStep):
    """``celery worker --beat-thread``: beat (the sweep's schedule) in a thread of the worker's own
    process. ``-B`` runs the same embedded beat as a forked process, which holds its own copy of
    everything the worker imported (about 75 MB); ``./rlt up``'s one worker runs it as a thread.
    As with ``-B``, run it in one worker per install."""

    label = "Beat (thread)"

    def __init__(self, w, beat_thread=False, **kwargs):
        self.enabled = bool(beat_thread)
        super().__init__(w, **kwargs)

    def create(self, w):
        from celery.beat import EmbeddedService

        return EmbeddedService(w.app, schedule_filename=w.schedule_filename, scheduler_cls=w.scheduler, thread=True)


app.user_options["worker"].add(
    CeleryOption(
        ["--beat-thread"],
        is_flag=True,
        default=False,
        help_group="Embedded Beat Options",
        help="Run beat's schedule in a thread of this worker (like -B, without a process of its own).",
    )
)
app.steps["worker"].add(BeatThread)


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_worker_logs(logger, **kwargs):
    """A worker replaces the root logger's handlers with its own: give them the settings' redaction filter."""
    from tracer.redaction import RedactLogFilter

    for handler in logger.handlers:
        if not any(isinstance(f, RedactLogFilter) for f in handler.filters):
            handler.addFilter(RedactLogFilter())
