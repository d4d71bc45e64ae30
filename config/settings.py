"""Django settings. Everything that differs between machines comes from the environment.

Embedded default (nothing but Python): SQLite and kombu's filesystem broker, both under ``var/``.
Production: ``DATABASE_URL=postgres://…`` and ``CELERY_BROKER_URL=redis://…``.
"""

import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from agents import prices as _prices
from agents import redaction as _redaction

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("RLT_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)
# Under pytest, each session gets its own test database file and queue, so a dashboard left running
# (``./rlt up``) or a second test session in the same tree never takes this session's tasks.
UNDER_PYTEST = "pytest" in sys.modules

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
# Development (DJANGO_DEBUG=1, the default) may run on a fixed, public key; anything else must set its own.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set, and DJANGO_DEBUG is not 1: with DEBUG off the secret key must come "
            "from the environment. Set DJANGO_SECRET_KEY to a long random value kept out of the repository "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(50))'), or DJANGO_DEBUG=1 for development."
        )
    SECRET_KEY = "insecure-local-only-set-DJANGO_SECRET_KEY-in-production"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "axes",
    "tracer",
    # django-ninja's Swagger UI files, served from here: the API's docs page (/api/docs) loads no CDN.
    "ninja",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from the web process itself, also with DEBUG off (no separate file server needed).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Pages and downloads gzip-compressed for clients that accept it (a 500-step run page is 600 KB of
    # HTML, ~40 KB compressed): Django's GZipMiddleware at a cheaper level for pages, padding each
    # response with random bytes as Django does (the "Heal the Breach" mitigation of BREACH), so a
    # secret echoed beside attacker text can't be guessed from the compressed length
    # (tracer/compression.py). After WhiteNoise, which serves static files precompressed itself.
    "tracer.compression.FastGZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "tracer.middleware.unusable_input_refused",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the login page saying so.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tracer.access.abilities",
            ],
        },
    },
]

# Persistent connections, checked before each request reuses one: a new PostgreSQL connection (a
# backend process forked) costs more than the whole runs list.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'tracer.sqlite3'}",
        conn_max_age=60,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A web process and workers write at once: WAL, immediate transactions, a busy timeout (seconds a
    # write waits for the lock before "database is locked"; the fault tests shorten it). Each connection
    # keeps up to 16 MiB of the database's pages (SQLite's default is 2 MiB): over a long history one runs
    # list reads more index pages than that, and each page dropped is read again from the OS next time.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384;",
        "transaction_mode": "IMMEDIATE",
        "timeout": float(os.environ.get("RLT_SQLITE_TIMEOUT_S") or 20),
    }
    DATABASES["default"].setdefault("TEST", {})
    # Worker subprocesses in tests must see the test database: use a file, not memory.
    if os.environ.get("RLT_TEST_DB_FILE"):
        DATABASES["default"]["TEST"]["NAME"] = os.environ["RLT_TEST_DB_FILE"]
    elif UNDER_PYTEST:
        DATABASES["default"]["TEST"]["NAME"] = str(VAR_DIR / f"test-{os.getpid()}.sqlite3")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Sessions in the database, read in one plain query (tracer/sessions.py).
SESSION_ENGINE = "tracer.sessions"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# --- Security --------------------------------------------------------------------------------
# Login rate limiting (django-axes): 5 failed logins for one username from one address lock that
# pair out for 15 minutes; the login page says so (tracer.access.login_locked_out). A success resets.
# Then Django's model backend, with the user each request's session names read by a prepared query.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "tracer.access.UserBackend"]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "tracer.access.login_locked_out"
AXES_USERNAME_CALLABLE = "tracer.access.login_username"

# Content Security Policy (django-csp 4): scripts and styles only from this site's static files, so
# nothing from a trace can run in a page even if escaping were ever missed. No inline script and no
# eval: htmx is told not to insert its indicator <style> nor to eval (meta htmx-config in base.html).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# DJANGO_HTTPS=1 when the dashboard is served over HTTPS (TLS ending at a proxy that sets
# X-Forwarded-Proto): cookies only over HTTPS, plain HTTP redirected, browsers told to stay on HTTPS.
HTTPS = os.environ.get("DJANGO_HTTPS", "0") == "1"
if HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 60 * 60 * 24 * 365
SILENCED_SYSTEM_CHECKS = [
    # HSTS includeSubDomains would force HTTPS on every other site under the dashboard's domain, and
    # preload is a commitment the domain's owner makes to browser vendors: neither is this app's call.
    "security.W005",
    "security.W021",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# ``collectstatic`` (run by ``./rlt up``) copies every static file here; whitenoise serves them from here.
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# Outside tests, file names carry a hash of their content (cached for a year, never stale after an
# upgrade), which needs ``collectstatic`` first. Tests serve the source files without hashes.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if UNDER_PYTEST
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Celery: a real worker over a real broker. The default broker needs no server.
BROKER_DIR = Path(os.environ.get("RLT_BROKER_DIR") or VAR_DIR / "broker")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "filesystem://localhost//"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        "polling_interval": float(os.environ.get("RLT_BROKER_POLL_S") or 0.05),
    }
# One queue name per test session (no dots: the filesystem transport splits file names on them).
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("RLT_QUEUE") or (f"rlt-test-{os.getpid()}" if UNDER_PYTEST else "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# After a pool process dies (OOM killer), free its slot after 2 s instead of 10: the redelivered run
# is then interrupted and re-run at once rather than after the slot comes back.
CELERY_WORKER_LOST_WAIT = 2
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A web request that sends tasks must not hang on a broker that is down or unreachable: connecting
# gives up after a few seconds, and a send is retried twice before it fails (the runs then stay
# queued and the sweep sends them again). The launch checks the broker first (tracer.delivery).
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Without a socket timeout, a publish on a connection whose server vanished waits for ever.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10}
# A run is stopped after RLT_RUN_TIME_LIMIT_S: the recorder checks after each step and the run ends
# "crashed" with the reason. Celery's limits, a little later, catch a model call that never returns
# (the soft one also ends the run "crashed"; the hard one replaces the pool process). The sender's
# values travel with each task message.
RLT_RUN_TIME_LIMIT_S = int(os.environ.get("RLT_RUN_TIME_LIMIT_S") or 900)
CELERY_TASK_SOFT_TIME_LIMIT = RLT_RUN_TIME_LIMIT_S + 30
CELERY_TASK_TIME_LIMIT = RLT_RUN_TIME_LIMIT_S + 90

# Model backends
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5")

# Model prices (agents/prices.py): genai-prices' table, with RLT_PRICES's overrides read once here so
# a bad one stops the process at start, naming the entry, instead of failing the first page with a cost.
try:
    _prices.overrides()
except _prices.PriceTableError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# Secrets are never stored (tracer.redaction, docs/recording.md "Secrets"): every text a run writes,
# every log line and every cassette is redacted with the built-in patterns (always on), these extra
# regular expressions (a JSON list, or one per line; an invalid one stops the process here, naming
# it), and the literal values of ANTHROPIC_API_KEY, DJANGO_SECRET_KEY and the variables RLT_REDACT_ENV names.
try:
    RLT_REDACT_PATTERNS = _redaction.patterns_from_text(os.environ.get("RLT_REDACT_PATTERNS", ""))
except _redaction.RedactionConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None
RLT_REDACT_ENV = _redaction.env_names(os.environ.get("RLT_REDACT_ENV", ""))
# Django's error page (DEBUG on) and error reports: redacted the same way.
DEFAULT_EXCEPTION_REPORTER = "tracer.redaction.RedactingExceptionReporter"

# The API (tracer/api.py, docs/api.md): the largest request body it reads, in bytes; a larger one is
# answered 413 naming this limit. Django reads at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes of a body
# (2.5 MB by default), so that follows when the API's limit is larger.
RLT_API_MAX_BYTES = int(os.environ.get("RLT_API_MAX_BYTES") or 8 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, RLT_API_MAX_BYTES)

# The OTLP receiver (/v1/traces, docs/otlp.md): the largest request body it reads, in bytes, compressed
# and again once gunzipped; a larger one is answered 413 naming this limit. Read from the request
# stream itself, so DATA_UPLOAD_MAX_MEMORY_SIZE does not apply.
RLT_OTLP_MAX_BYTES = int(os.environ.get("RLT_OTLP_MAX_BYTES") or 16 * 1024 * 1024)

# Tests only: seconds the recorder waits after committing each step, so a test can watch a run
# while it is still running. Zero everywhere else.
RLT_STEP_DELAY_S = float(os.environ.get("RLT_STEP_DELAY_S") or 0)

# Tests only: while the file this names exists, a worker's recorder waits before it writes a run's
# final answer or its end (``tracer.recording.DbRecorder``), so a test sees the run running for as
# long as it looks, then lets it finish by deleting the file. Unset everywhere else.
RLT_TEST_HOLD_FILE = os.environ.get("RLT_TEST_HOLD_FILE", "")

# The database is the truth about what must execute; the broker only delivers (docs/recording.md,
# "Leases"). A claim holds a run for RLT_LEASE_S; its process renews the lease with every step and
# from a heartbeat every RLT_LEASE_S / 3. Every RLT_SWEEP_S, beat (the worker's ``-B`` in ``./rlt up``)
# sends the sweep, which ends ``interrupted`` the runs whose lease lapsed and queues one re-run of
# each, sends again a queued run's task after RLT_RESEND_AFTER_S (doubling with each send, at most
# 32 ×), and gives up on queued runs no worker took in RLT_QUEUED_GIVE_UP_S while no worker worked.
# A run's findings (tracer/diagnosis.py) are written when it ends; "0" leaves them to a later
# `manage.py findings --recompute` (a bulk import diagnosed afterwards, or a benchmark without them).
RLT_DIAGNOSE = os.environ.get("RLT_DIAGNOSE", "1") != "0"

# Runs from outside (the step API, OTLP) with no step or span for RLT_OUTSIDE_IDLE_S end interrupted.
RLT_LEASE_S = float(os.environ.get("RLT_LEASE_S") or 60)
RLT_SWEEP_S = float(os.environ.get("RLT_SWEEP_S") or 15)
RLT_RESEND_AFTER_S = float(os.environ.get("RLT_RESEND_AFTER_S") or 30)
RLT_QUEUED_GIVE_UP_S = float(os.environ.get("RLT_QUEUED_GIVE_UP_S") or 3600)
RLT_OUTSIDE_IDLE_S = float(os.environ.get("RLT_OUTSIDE_IDLE_S") or 3600)
# Retention (tracer/retention.py): days runs are kept, in all (``90``) or per source (``otlp=7,90``);
# unset keeps every run. Beat applies it every RLT_RETENTION_EVERY_S, in batches.
RLT_RETENTION_DAYS = os.environ.get("RLT_RETENTION_DAYS", "")
RLT_RETENTION_EVERY_S = float(os.environ.get("RLT_RETENTION_EVERY_S") or 3600)
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {
        "task": "tracer.tasks.runs_sweep_task",
        "schedule": RLT_SWEEP_S,
        # a sweep nobody took in time is dropped, not piled up behind the next one
        "options": {"expires": RLT_SWEEP_S},
    },
    "runs-purge": {
        "task": "tracer.tasks.runs_purge_task",
        "schedule": RLT_RETENTION_EVERY_S,
        "options": {"expires": RLT_RETENTION_EVERY_S},
    },
}

# To stderr, which ``./rlt up`` writes to the log folder in RLT_VAR_DIR (web.log, worker.log). Errors
# behind a 500 page land there with their traceback. Secrets in a message, its arguments or its
# traceback are redacted (the Celery worker's own handlers get the same filter, config.celery).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "tracer.redaction.RedactLogFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # The SDK logs every request at INFO, simulated ones too, as "POST https://api.anthropic.com/…":
    # a worker log would then read as if the simulated model called the API.
    "loggers": {name: {"level": "WARNING"} for name in ("httpx", "httpx2", "anthropic")},
}
