import os

from celery import Celery

from . import filesystem_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# filesystem:// (the default broker) writes each message whole before a worker can read it.
filesystem_broker.register()

app = Celery("repair_loop_tracer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
