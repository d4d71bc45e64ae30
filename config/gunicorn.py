"""gunicorn settings for the dashboard: ``gunicorn -c config/gunicorn.py`` (it names the application).

``./rlt up`` adds ``--bind 127.0.0.1:<port>`` and log files in RLT_VAR_DIR; in production, add your own
``--bind``. Options on the command line override this file.
"""

import gc
import os

from gunicorn.glogging import Logger

from agents.redaction import RedactingLogFilter

# gunicorn's asyncio worker reads every request whole before a thread of config/asgi.py runs Django on
# it (WEB_THREADS per process), so slow clients cost a socket, not a thread (docs/deployment.md, "Web");
# a second process keeps one slow page from holding up the rest.
wsgi_app = "config.asgi:application"
worker_class = "asgi"
workers = int(os.environ.get("WEB_CONCURRENCY") or 2)
# Connections each process keeps open at once, slow ones included (each costs a socket and a buffer).
worker_connections = 2000
# On SIGTERM, requests being answered get this long to finish.
graceful_timeout = 10
# gunicorn 25.1+ opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl), which any
# other gunicorn of that user (another clone, another port) takes over. Nothing here uses it.
control_socket_disable = True


def post_worker_init(worker) -> None:
    """With Django loaded, its objects (modules, models, settings: most of the process's) are moved out
    of the cyclic garbage collector's reach: they live as long as the process, and each full
    collection would otherwise walk them all again during some request."""
    gc.freeze()


class RedactingLogger(Logger):
    """gunicorn's error and access logs, redacted like every other log (docs/recording.md, "Secrets"):
    a request line quoting a key (``/runs/?q=sk-ant-…``) is written with a marker in its place."""

    def setup(self, cfg):
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, RedactingLogFilter) for f in handler.filters):
                    handler.addFilter(RedactingLogFilter())


logger_class = RedactingLogger
