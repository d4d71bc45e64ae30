"""gunicorn settings for the dashboard: ``gunicorn -c config/gunicorn.py config.wsgi``.

``./rlt up`` adds ``--bind 127.0.0.1:<port>`` and log files in RLT_VAR_DIR; in production, add your own
``--bind``. Options on the command line override this file.
"""

import os

# Threads answer the many small htmx polls; a second process keeps one slow page from holding up the rest.
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or 2)
threads = 4
# On SIGTERM, requests being answered get this long to finish.
graceful_timeout = 10
# gunicorn 25.1+ opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl), which any
# other gunicorn of that user (another clone, another port) takes over. Nothing here uses it.
control_socket_disable = True
