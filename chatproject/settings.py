"""Tether settings, read from the environment with embedded defaults.

Unset ``DATABASE_URL`` means a SQLite file under ``var/``; unset ``REDIS_URL`` means the
in-memory channel layer (one process only). Set both to run several daphne processes.
"""

import json
import os
import secrets
import socket
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from chatproject import cookie_policy, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TETHER_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str = "") -> list[str]:
    """A comma-separated variable; spaces around the items and empty items are dropped."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# ``DJANGO_ENV=production`` turns on the production profile (HTTPS only, secure cookies, HSTS,
# no generated key); anything else is the embedded development default.
DJANGO_ENV = os.environ.get("DJANGO_ENV", "development").strip().lower()
PRODUCTION = DJANGO_ENV == "production"
DEBUG = _env_bool("DEBUG", False)
# A server process freezes its startup heap out of the garbage collector (``chatproject.heap``).
GC_FREEZE = _env_bool("GC_FREEZE", True)

# The key comes from the environment, else from a private file outside the repository, which
# the development profile creates on first use (chatproject.secret_key). Without DEBUG a
# known, empty or weak key stops the process here.
SECRET_KEY_FILE = Path(os.environ.get("SECRET_KEY_FILE", VAR_DIR / "secret_key"))
if "SECRET_KEY" in os.environ:
    SECRET_KEY = os.environ["SECRET_KEY"]
    _key_source = "the SECRET_KEY environment variable"
else:
    SECRET_KEY = secret_key.load(SECRET_KEY_FILE, create=not PRODUCTION)
    _key_source = str(SECRET_KEY_FILE)
if not DEBUG:
    secret_key.refuse_weak(SECRET_KEY, _key_source)

ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
# Origins other than the request's own that may POST a form and open a socket
# (sessions_app.origin): "https://chat.example.com", or "https://*.example.com".
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "django_tasks",
    "django_tasks_db",
    "threads_app",
    "media_app",
    "sessions_app",
    "chainlit_compat",
    "chainlit_frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The UI's language from the browser's Accept-Language (LANGUAGES below).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A signed-out browser signed in by the chat app's header_auth_callback (sessions_app.app_auth).
    "sessions_app.app_auth.header_sign_in",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # The admin's pages get a Content-Security-Policy (the chat page sets its own).
    "chatproject.csp.AdminContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "chatproject.urls"
ASGI_APPLICATION = "chatproject.asgi.application"

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
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    # Under ASGI every sync request runs on a thread of its own, so persistent per-thread
    # connections (CONN_MAX_AGE > 0) pile up; a process-wide pool hands them out instead.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    # Names this process's connections in pg_stat_activity, so that another process can tell
    # a stalled one (its connections still open) from a dead one (sessions_app.processes).
    DB_APPLICATION_NAME = f"tether-{socket.gethostname()[:30]}-{os.getpid()}-{secrets.token_hex(4)}"
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = DB_APPLICATION_NAME
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("DB_POOL_SIZE", "20")),
        "timeout": 10,
    }
    # psycopg's default (Django turns preparing off): only server-binding cursors prepare, and
    # the only ones are ``threads_app.prepared``'s; the ORM's cursors bind on the client.
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 5
else:
    DB_APPLICATION_NAME = ""  # one process per SQLite file: nobody to tell stalled from dead
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")),
            # IMMEDIATE transactions take the write lock up front, so two writers queue on
            # the busy timeout instead of failing with "database is locked" on upgrade.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
            "TEST": {"NAME": os.environ.get("SQLITE_TEST_PATH", str(VAR_DIR / "test.sqlite3"))},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Threads the socket server's database calls run on (``sessions_app.database``), each with a
# connection from the pool above; SQLite keeps one. Leave pool room for HTTP requests.
DATABASE_THREADS = int(os.environ.get("DATABASE_THREADS", "8"))

# --- Channel layer --------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis, with one receiver per process that survives Redis outages
            # (sessions_app.channel_layer explains why).
            "BACKEND": "sessions_app.channel_layer.ResilientRedisChannelLayer",
            "CONFIG": {
                # redis-py 8 raises MaxConnectionsError past the pool size instead of
                # waiting, so a burst of disconnects would fail its group_discard calls.
                # The pool is sized well above any burst a process sees.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "max_connections": int(os.environ.get("REDIS_MAX_CONNECTIONS", "2000")),
                        # redis-py 8 defaults socket_timeout to 5 s, the same as the 5 s
                        # BZPOPMIN that channels-redis blocks on in receive(): the read
                        # times out first and kills the consumer holding the receive lock
                        # (idle sockets dropped every ~5 s). Keep it above that block.
                        "socket_timeout": float(os.environ.get("REDIS_SOCKET_TIMEOUT", "15")),
                    }
                ],
                "capacity": 1000,
                "expiry": 60,
                # Seconds a "no member elsewhere" lease is trusted (sessions_app.group_leases);
                # 0: every publish reads the group's members in Redis.
                "group_lease": float(os.environ.get("CHANNEL_GROUP_LEASE", "1")),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The cache holds the API's rate-limit counters: shared by all processes on Redis.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "tether"),
            "OPTIONS": {"pool_class": "chatproject.cache.SharedConnectionPool"},
        }
    }

# --- Auth -----------------------------------------------------------------------------
# Every path that sets a password runs these (the admin's forms, createsuperuser,
# changepassword, create_chat_user --password).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": int(os.environ.get("PASSWORD_MIN_LENGTH", "10"))},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one username
# from one address, that pair is locked out for LOGIN_LOCKOUT_MINUTES (answered 429). Keyed on
# the pair, so an attacker cannot lock a user out from elsewhere, and many users behind one
# address (an office, the test suite on 127.0.0.1) do not lock each other out. The records
# live in the database, so every server process counts the same failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # The chat app's password_auth_callback, when it has one (sessions_app.app_auth).
    "sessions_app.app_auth.AppPasswordBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = _env_bool("LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Failures are recorded; a row per successful login is not needed.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
# Behind PROXY_COUNT reverse proxies, the client address axes keys on comes from
# X-Forwarded-For (chatproject.client_address; axes alone would need django-ipware).
PROXY_COUNT = int(os.environ.get("PROXY_COUNT") or 0)
AXES_CLIENT_IP_CALLABLE = "chatproject.client_address.client_ip"
# API tokens (rest_framework.authtoken) expire this many days after they were created;
# 0 keeps them forever. ``manage.py revoke_tokens`` and the admin revoke them earlier.
API_TOKEN_LIFETIME_DAYS = float(os.environ.get("API_TOKEN_LIFETIME_DAYS", "90"))
# A comma-separated list of hasher paths; the test suite uses a fast one.
if os.environ.get("PASSWORD_HASHERS"):
    PASSWORD_HASHERS = os.environ["PASSWORD_HASHERS"].split(",")
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Tokens a process takes from a user's Redis budget at once and spends without a round trip
# (threads_app.token_bucket): one take per user goes to Redis at a time in a process, and what
# is not spent goes back when the user's socket leaves. 1: every send asks Redis, exact across
# processes; 10 saves the round trip for 9 sends in 10 and may refuse a user who sends through
# several processes at once up to 9 tokens early per other process.
BUDGET_ALLOWANCE = int(os.environ.get("BUDGET_ALLOWANCE", "10"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sessions_app.tokens.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies are parsed with bounded depth and size (threads_app.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "threads_app.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "sends": os.environ.get("SEND_THROTTLE_RATE", "120/min"),
        "uploads": os.environ.get("UPLOAD_THROTTLE_RATE", "30/min"),
        "feedback": os.environ.get("FEEDBACK_THROTTLE_RATE", "60/min"),
        # The budgets of threads_app.budgets not above: clicks on action buttons, changes of
        # the chat settings, answers to asks, thread searches.
        "clicks": os.environ.get("CLICKS_THROTTLE_RATE", "60/min"),
        "settings": os.environ.get("SETTINGS_THROTTLE_RATE", "60/min"),
        "ask_answers": os.environ.get("ASK_ANSWERS_THROTTLE_RATE", "60/min"),
        "searches": os.environ.get("SEARCHES_THROTTLE_RATE", "60/min"),
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# The OpenAPI schema at /api/schema/ and Swagger UI at /api/docs/, whose assets are served
# from the sidecar package (static files), so the docs work without internet access.
SPECTACULAR_SETTINGS = {
    "TITLE": "Tether API",
    "DESCRIPTION": "Threads, transcripts and sends of Tether, a chat backend for conversational AI apps.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No badge from swagger.io's online validator: the page makes no request off this server.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# --- I18n / static --------------------------------------------------------------------
LANGUAGE_CODE = "en"
# The languages the web UI is translated into; the browser's Accept-Language picks one
# (LocaleMiddleware). Catalogs live in locale/ (templates and Python) and reach the page's
# scripts through Django's JavaScriptCatalog (sessions_app/static/tether/i18n.js).
LANGUAGES = [("en", "English"), ("fr", "Français")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Tether ---------------------------------------------------------------------------
# Dotted path of the app module whose hooks answer the chat.
CHAT_APP = os.environ.get("CHAT_APP", "sessions_app.default_app")
# Where Chainlit's HTTP API is served (``chainlit_compat``): beside Chainlit's frontend, whose
# own routes (``/``, ``/thread/<id>``, ``/login``) are Tether's page routes at the root.
CHAINLIT_PATH_PREFIX = "/" + os.environ.get("CHAINLIT_PATH_PREFIX", "/chainlit").strip("/")
# A directory of Chainlit's translation files (``en-US.json``, ...), e.g. ``chainlit/translations``
# of the chainlit wheel; unset, ``/project/translations`` answers an empty translation.
CHAINLIT_TRANSLATIONS_DIR = os.environ.get("CHAINLIT_TRANSLATIONS_DIR", "")
# Threads for the app's synchronous code: plain ``def`` hooks and ``chat.make_async`` calls.
CHAT_APP_THREADS = int(os.environ.get("CHAT_APP_THREADS", "32"))


def _starters_setting(raw: str) -> list[dict[str, str]]:
    """``CHAT_STARTERS``: a JSON list of ``{"label", "message", "icon"?}``, checked at start."""
    try:
        starters = json.loads(raw or "[]")
    except ValueError as exc:
        raise ImproperlyConfigured(f"CHAT_STARTERS is not JSON: {exc}") from None
    if not isinstance(starters, list) or not all(
        isinstance(s, dict)
        and isinstance(s.get("label"), str)
        and isinstance(s.get("message"), str)
        and isinstance(s.get("icon", ""), str | None)
        for s in starters
    ):
        raise ImproperlyConfigured(
            'CHAT_STARTERS must be a JSON list of {"label", "message", "icon"?} objects'
        )
    return starters


# The starters the default app (the engine runtime) shows on an empty chat.
CHAT_STARTERS = _starters_setting(os.environ.get("CHAT_STARTERS", ""))
# Seconds a disconnected session is kept so that a reconnect restores it.
SESSION_TIMEOUT = float(os.environ.get("SESSION_TIMEOUT", "3600"))
# Event replay (sessions_app.event_log): the window of each session's recent events that a
# reconnecting client with an offset gets again; by count and by age (seconds). 0 turns it off.
EVENT_REPLAY_MAX_EVENTS = int(os.environ.get("EVENT_REPLAY_MAX_EVENTS", "1000"))
EVENT_REPLAY_MAX_AGE = float(os.environ.get("EVENT_REPLAY_MAX_AGE", "120"))
# Budgets of what a client sends (sessions_app.inputs; the API uses the same message limit).
MAX_MESSAGE_CHARS = int(os.environ.get("MAX_MESSAGE_CHARS", "100000"))
CHAT_SETTINGS_MAX_BYTES = int(os.environ.get("CHAT_SETTINGS_MAX_BYTES", "65536"))
USER_ENV_MAX_BYTES = int(os.environ.get("USER_ENV_MAX_BYTES", "16384"))
# Liveness (sessions_app.processes): each server process writes a heartbeat this often, and
# one whose heartbeat is older than PROCESS_DEAD_AFTER is dead; what it held is taken over.
PROCESS_HEARTBEAT_EVERY = float(os.environ.get("PROCESS_HEARTBEAT_EVERY", "0.5"))
PROCESS_DEAD_AFTER = float(os.environ.get("PROCESS_DEAD_AFTER", "2"))
# A process whose beats stopped but whose database connections are still open is stalled,
# not dead (a loaded host, a long GIL hold, a VM pause, SIGSTOP): the others renew its lease
# for up to this many seconds of stall (PostgreSQL only; sessions_app.processes).
PROCESS_STALL_LIMIT = float(os.environ.get("PROCESS_STALL_LIMIT", "30"))
# How often the recovery loop (sessions_app.recovery) looks for sends nobody holds.
RECOVERY_EVERY = float(os.environ.get("RECOVERY_EVERY", "1"))
# Engine runs (subprocesses) nobody used for this many seconds are closed; the thread keeps
# its engine conversation id, so the next message resumes it (sessions_app.runtime.idle_runs).
# 0 switches it off.
ENGINE_IDLE_TIMEOUT = float(os.environ.get("ENGINE_IDLE_TIMEOUT", "600"))
# Chat sessions (each with its engine run) a box keeps in one process; the least recently used
# idle one is closed past it (sessions_app.runtime.pool).
ENGINE_SESSIONS_PER_BOX = int(os.environ.get("ENGINE_SESSIONS_PER_BOX", "32"))
# ... and the process keeps across all its boxes (a user may own several boxes).
ENGINE_SESSIONS_PER_PROCESS = int(os.environ.get("ENGINE_SESSIONS_PER_PROCESS", "128"))
# SIGTERM: seconds a stopping process gives running turns to finish before it ends them
# with an error step (sessions_app.shutdown).
SHUTDOWN_GRACE = float(os.environ.get("SHUTDOWN_GRACE", "10"))
# Seconds each check of ``GET /readyz`` (database, Redis) may take before it counts as failed
# (chatproject.health); a balancer's probe timeout should be longer.
READINESS_TIMEOUT = float(os.environ.get("READINESS_TIMEOUT", "2"))
# Keep the user's ``env`` in the persisted user session (off: it is replaced by {}).
PERSIST_USER_ENV = _env_bool("PERSIST_USER_ENV", False)
# Engine.IO transport settings, announced to clients in the open packet.
SOCKETIO_PING_INTERVAL = float(os.environ.get("SOCKETIO_PING_INTERVAL", "25"))
SOCKETIO_PING_TIMEOUT = float(os.environ.get("SOCKETIO_PING_TIMEOUT", "20"))
SOCKETIO_MAX_PAYLOAD = int(os.environ.get("SOCKETIO_MAX_PAYLOAD", str(1_000_000)))

# Log lines: plain text (the default, for ``make run``) or one JSON object per line
# (``LOG_FORMAT=json``, chatproject.log_format) carrying the process, session, thread, turn and
# send ids of the conversation whose work wrote it (chatproject.log_context).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower() or "text"
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"conversation_ids": {"()": "chatproject.log_context.ConversationIds"}},
    "formatters": {"json": {"()": "chatproject.log_format.JsonLines"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["conversation_ids"],
            **({"formatter": "json"} if LOG_FORMAT == "json" else {}),
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING").upper()},
}

# Prometheus metrics (sessions_app.metrics, served at /metrics by chatproject.metrics_endpoint).
# Off: every counter is a no-op and /metrics answers 404. With several processes behind one
# address, PROMETHEUS_MULTIPROC_DIR (an environment variable read by prometheus-client) names a
# directory they share, so that any of them answers for all (``make cluster`` sets it).
METRICS_ENABLED = _env_bool("METRICS_ENABLED", True)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)  # set but empty: one process's own registry
elif METRICS_ENABLED:
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
# Who may read /metrics: a request carrying ``Authorization: Bearer <METRICS_TOKEN>`` (when
# set), or one from these networks (the client's address as ``PROXY_COUNT`` reads it).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = [
    n.strip()
    for n in os.environ.get("METRICS_ALLOWED_NETWORKS", "127.0.0.1/32,::1/128").split(",")
    if n.strip()
]
# How often each process publishes its samples for the admin's dashboard (its live gauges
# and per-minute samples, sessions_app.dashboard_samples), in seconds; 0 publishes none.
DASHBOARD_PUBLISH_EVERY = float(os.environ.get("DASHBOARD_PUBLISH_EVERY", "5"))
# OpenTelemetry traces (chatproject.tracing): off unless OTEL_ENABLED; then the Django, psycopg
# and Redis instrumentations and Tether's own spans (socket event, mailbox, turn, reply), sent by
# OTEL_TRACES_EXPORTER: otlp (OTEL_EXPORTER_OTLP_* as the standard says), console, file (JSON
# lines appended to OTEL_TRACES_FILE) or none.
TRACING_ENABLED = _env_bool("OTEL_ENABLED", False)
TRACING_EXPORTER = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
if TRACING_EXPORTER not in ("otlp", "console", "file", "none"):
    raise ImproperlyConfigured(
        f"OTEL_TRACES_EXPORTER must be otlp, console, file or none, not {TRACING_EXPORTER!r}"
    )
TRACING_FILE = os.environ.get("OTEL_TRACES_FILE", "")
# Which traces are kept, by the standard OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the
# ratio of the *traceidratio samplers, 0 to 1): parentbased_traceidratio with 0.01 keeps 1% of
# turns, and a turn forwarded to another process follows its sender's decision.
TRACING_SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
TRACING_SAMPLER = os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
if TRACING_SAMPLER not in TRACING_SAMPLERS:
    raise ImproperlyConfigured(
        f"OTEL_TRACES_SAMPLER must be one of {', '.join(TRACING_SAMPLERS)}, not {TRACING_SAMPLER!r}"
    )


def _sampler_ratio(raw: str) -> float:
    """``OTEL_TRACES_SAMPLER_ARG`` of a ratio sampler: 1 when unset, else a number from 0 to 1."""
    if not raw.strip():
        return 1.0
    try:
        ratio = float(raw)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1 for {TRACING_SAMPLER}, not {raw!r}"
        )
    return ratio


# The other samplers take no argument (the standard says to ignore it).
TRACING_SAMPLER_RATIO = (
    _sampler_ratio(os.environ.get("OTEL_TRACES_SAMPLER_ARG", ""))
    if TRACING_SAMPLER.endswith("traceidratio")
    else 1.0
)
TRACING_SERVICE_NAME = os.environ.get("OTEL_SERVICE_NAME", "tether").strip() or "tether"
# Serve /static/ from the ASGI app itself (the embedded default; put a CDN or a reverse
# proxy in front in production and set SERVE_STATIC=0).
SERVE_STATIC = _env_bool("SERVE_STATIC", True)
# Where the echo engine keeps its conversations (turn counts by engine session id).
ECHO_STATE_DIR = Path(os.environ.get("ECHO_STATE_DIR", VAR_DIR / "echo"))
# Seconds the echo engine waits before each streamed word when a box sets no ``slow`` option:
# a demo pace at which streaming, stop and queueing can be watched (0: as fast as it can).
ECHO_DEMO_PACE = max(0.0, float(os.environ.get("ECHO_DEMO_PACE") or 0))
# Chainlit's own web frontend and copilot widget, served by Tether (chainlit_frontend) under
# CHAINLIT_PATH_PREFIX (above), where Chainlit's HTTP API answers too. CHAINLIT_FRONTEND_DIR names a
# build (``manage.py install_chainlit_frontend`` writes one to var/chainlit-frontend/): unset,
# nothing is served there and Tether's own page stays the only one. CHAINLIT_PUBLIC_DIR is a
# Chainlit app's ``public/`` directory (theme.json, favicon, logo_light/dark, avatars/), optional.
CHAINLIT_FRONTEND_DIR = (
    Path(os.environ["CHAINLIT_FRONTEND_DIR"]) if os.environ.get("CHAINLIT_FRONTEND_DIR") else None
)
# The build's translations, unless CHAINLIT_TRANSLATIONS_DIR names others.
if not CHAINLIT_TRANSLATIONS_DIR and CHAINLIT_FRONTEND_DIR is not None:
    CHAINLIT_TRANSLATIONS_DIR = str(CHAINLIT_FRONTEND_DIR / "translations")
CHAINLIT_PUBLIC_DIR = (
    Path(os.environ["CHAINLIT_PUBLIC_DIR"]) if os.environ.get("CHAINLIT_PUBLIC_DIR") else None
)
# The name in the frontend's title and link previews (Chainlit's ``[UI] name``).
CHAINLIT_UI_NAME = os.environ.get("CHAINLIT_UI_NAME", "Tether")
# Photos in messages (media_app): the largest photo accepted, in bytes, and how many one
# message may carry. Uploads go over HTTP (POST /api/uploads/), not the socket.
MAX_IMAGE_BYTES = int(os.environ.get("MAX_IMAGE_BYTES", str(10_000_000)))
MAX_IMAGES_PER_MESSAGE = int(os.environ.get("MAX_IMAGES_PER_MESSAGE", "10"))

# Elements (media_app.elements): files an app attaches to messages (images, files, PDFs,
# texts, plots) and files users upload that are not photos. Their bytes go through Django's
# storage API under the ``tether_elements`` alias: a FileSystemStorage in VAR_DIR/elements by
# default; any storage backend (e.g. django-storages' S3 backend) by setting
# ELEMENTS_STORAGE_BACKEND and ELEMENTS_STORAGE_OPTIONS (a JSON object of its options).
ELEMENTS_DIR = Path(os.environ.get("ELEMENTS_DIR", VAR_DIR / "elements"))
_ELEMENTS_BACKEND = os.environ.get("ELEMENTS_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage")
_ELEMENTS_OPTIONS = json.loads(os.environ.get("ELEMENTS_STORAGE_OPTIONS") or "{}") or (
    {"location": str(ELEMENTS_DIR)} if _ELEMENTS_BACKEND.endswith("FileSystemStorage") else {}
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "tether_elements": {"BACKEND": _ELEMENTS_BACKEND, "OPTIONS": _ELEMENTS_OPTIONS},
}
# The largest element an app may send, in bytes.
ELEMENT_MAX_BYTES = int(os.environ.get("ELEMENT_MAX_BYTES", str(50_000_000)))
# What users may upload (POST /api/uploads/): content types (comma-separated; "text/*" style
# wildcards allowed) and the largest file. The default is photos only, as before; e.g.
# UPLOAD_ALLOWED_TYPES="image/*,application/pdf,text/plain,text/csv". A file's type is read
# from its content (and for text types checked to be text), never taken from the client.
UPLOAD_ALLOWED_TYPES = [
    t.strip()
    for t in os.environ.get("UPLOAD_ALLOWED_TYPES", "image/jpeg,image/png,image/gif,image/webp").split(",")
    if t.strip()
]
UPLOAD_MAX_BYTES = int(os.environ.get("UPLOAD_MAX_BYTES", str(MAX_IMAGE_BYTES)))

# --- Limits (docs/configuration.md, "Limits") ------------------------------------------
# Request bodies, checked before anything parses them (chatproject.body_limits): the
# Content-Length first, then the bytes as they stream in. The send endpoint's own default is
# what a message's photos need (media_app.parsers); uploads take one photo.
MAX_REQUEST_BODY_BYTES = int(os.environ.get("MAX_REQUEST_BODY_BYTES", str(1_000_000)))
SEND_MAX_BODY_BYTES = (
    int(os.environ["SEND_MAX_BODY_BYTES"]) if os.environ.get("SEND_MAX_BODY_BYTES") else None
)
INTEGRATION_MAX_BODY_BYTES = int(os.environ.get("INTEGRATION_MAX_BODY_BYTES", str(1_000_000)))
# The shape of a JSON body: nesting depth, and arrays plus objects in all.
JSON_MAX_DEPTH = int(os.environ.get("JSON_MAX_DEPTH", "32"))
JSON_MAX_CONTAINERS = int(os.environ.get("JSON_MAX_CONTAINERS", "10000"))
# What a transcript may hold and what one read of it may carry (threads_app.step_budgets,
# threads_app.transcript_budgets). A step's input and output are each cut at STEP_MAX_BYTES
# (UTF-8) with a marker, streamed tokens included; a thread keeps THREAD_MAX_BYTES of step
# text, after which new steps keep only the marker. A history page or bootstrap carries at
# most READ_PAGE_MAX_BYTES of StepDicts (as JSON), a ``resume_thread`` at most
# RESUME_MAX_BYTES (keep it below daphne's --websocket-max-message-size), and a chat context
# rebuilt from the transcript holds the newest CHAT_CONTEXT_MAX_BYTES of it.
STEP_MAX_BYTES = int(os.environ.get("STEP_MAX_BYTES", str(512 * 1024)))
THREAD_MAX_BYTES = int(os.environ.get("THREAD_MAX_BYTES", str(64 * 1024 * 1024)))
READ_PAGE_MAX_BYTES = int(os.environ.get("READ_PAGE_MAX_BYTES", str(4 * 1024 * 1024)))
RESUME_MAX_BYTES = int(os.environ.get("RESUME_MAX_BYTES", str(8 * 1024 * 1024)))
CHAT_CONTEXT_MAX_BYTES = int(os.environ.get("CHAT_CONTEXT_MAX_BYTES", str(2 * 1024 * 1024)))
# What one user's reads of transcripts may carry in all (threads_app.read_budget): a burst,
# refilled per second; an exhausted user's reads shrink to the floor instead of failing.
# A burst of 0 switches it off.
TRANSCRIPT_READ_BURST_BYTES = int(os.environ.get("TRANSCRIPT_READ_BURST_BYTES", str(64 * 1024 * 1024)))
TRANSCRIPT_READ_BYTES_PER_SECOND = int(os.environ.get("TRANSCRIPT_READ_BYTES_PER_SECOND", str(1024 * 1024)))
TRANSCRIPT_READ_FLOOR_BYTES = int(os.environ.get("TRANSCRIPT_READ_FLOOR_BYTES", str(64 * 1024)))
# Uploads: bytes a user may keep in uploads at once, and the age (hours) after which
# ``manage.py purge_uploads`` deletes them.
UPLOAD_QUOTA_BYTES = int(os.environ.get("UPLOAD_QUOTA_BYTES", str(200_000_000)))
UPLOAD_EXPIRY_HOURS = float(os.environ.get("UPLOAD_EXPIRY_HOURS", "24"))
# The most pixels (width x height, read from the file's header) a photo may declare.
MAX_IMAGE_PIXELS = int(os.environ.get("MAX_IMAGE_PIXELS", str(50_000_000)))
# Webhooks: hosts or networks (comma-separated, e.g. "127.0.0.1,10.0.0.0/8,hooks.internal")
# a delivery may go to although they resolve to a loopback, private, link-local, multicast or
# reserved address; and the most bytes of a receiver's answer that are read.
WEBHOOK_ALLOWED_HOSTS = _env_list("WEBHOOK_ALLOWED_HOSTS")
WEBHOOK_MAX_RESPONSE_BYTES = int(os.environ.get("WEBHOOK_MAX_RESPONSE_BYTES", "65536"))
# Seconds between webhook delivery attempts (comma-separated), and one attempt's timeout.
WEBHOOK_RETRY_DELAYS = [
    float(part) for part in os.environ.get("WEBHOOK_RETRY_DELAYS", "0.5,1,2,4").split(",") if part.strip()
]
WEBHOOK_TIMEOUT = float(os.environ.get("WEBHOOK_TIMEOUT", "10"))

# Durable background work (webhook attempts): django-tasks' database backend, run by worker
# threads in every server process (sessions_app.task_worker). 0 threads: no process runs
# tasks (a separate ``manage.py db_worker`` may).
# No fixed queue list: each deployment's queue is named by its channel layer
# (sessions_app.webhook_tasks.queue).
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": []}}
TASK_WORKER_THREADS = int(os.environ.get("TASK_WORKER_THREADS", "2"))
# Seconds an idle worker waits before looking for a task again.
TASK_WORKER_INTERVAL = float(os.environ.get("TASK_WORKER_INTERVAL", "0.5"))

# --- Production profile ---------------------------------------------------------------
# ``DJANGO_ENV=production``: ``manage.py check --deploy`` is clean. Behind a reverse proxy
# that terminates TLS, set SECURE_PROXY_SSL_HEADER=1 (the proxy must set X-Forwarded-Proto
# and strip it from clients), or SECURE_SSL_REDIRECT=0 when the proxy redirects itself.
if PRODUCTION:
    SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", True)
    # Balancers probe each process over plain HTTP on its own port: answer them, not a redirect.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    if _env_bool("SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", True)
    CSRF_COOKIE_SECURE = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REFERRER_POLICY = "same-origin"
    X_FRAME_OPTIONS = "DENY"

# --- The session cookie ---------------------------------------------------------------
# Secure under the production profile (not to be weakened there); elsewhere on request, e.g. a
# development copy behind HTTPS, or on http://localhost, which browsers count as secure.
SESSION_COOKIE_SECURE = True if PRODUCTION else _env_bool("SESSION_COOKIE_SECURE", False)
# ``None``: the cross-site sign-in, for a copilot host page or a Chainlit frontend on another
# site (chatproject.cookie_policy); needs the Secure cookie above, else the start is refused.
# The CSRF cookie stays Lax: nothing of another site's page uses it (Chainlit's API and the
# socket are checked by Origin, and such a page cannot read the cookie anyway).
SESSION_COOKIE_SAMESITE = cookie_policy.session_cookie_samesite(
    os.environ.get("SESSION_COOKIE_SAMESITE"), secure=SESSION_COOKIE_SECURE
)
