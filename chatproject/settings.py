"""Tether settings, read from the environment with embedded defaults.

Unset ``DATABASE_URL`` means a SQLite file under ``var/``; unset ``REDIS_URL`` means the
in-memory channel layer (one process only). Set both to run several daphne processes.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TETHER_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


SECRET_KEY = os.environ.get("SECRET_KEY", "tether-dev-secret-key-change-me-in-production")
DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
CSRF_TRUSTED_ORIGINS = [origin for origin in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if origin]

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
    "threads_app",
    "media_app",
    "sessions_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("DB_POOL_SIZE", "20")),
        "timeout": 10,
    }
else:
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

# --- Channel layer --------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
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
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# A comma-separated list of hasher paths; the test suite uses a fast one.
if os.environ.get("PASSWORD_HASHERS"):
    PASSWORD_HASHERS = os.environ["PASSWORD_HASHERS"].split(",")
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_RATES": {"sends": os.environ.get("SEND_THROTTLE_RATE", "120/min")},
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
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Tether ---------------------------------------------------------------------------
# Dotted path of the app module whose hooks answer the chat.
CHAT_APP = os.environ.get("CHAT_APP", "sessions_app.default_app")
# Seconds a disconnected session is kept so that a reconnect restores it.
SESSION_TIMEOUT = float(os.environ.get("SESSION_TIMEOUT", "3600"))
# Liveness (sessions_app.processes): each server process writes a heartbeat this often, and
# one whose heartbeat is older than PROCESS_DEAD_AFTER is dead; what it held is taken over.
PROCESS_HEARTBEAT_EVERY = float(os.environ.get("PROCESS_HEARTBEAT_EVERY", "0.5"))
PROCESS_DEAD_AFTER = float(os.environ.get("PROCESS_DEAD_AFTER", "2"))
# How often the recovery loop (sessions_app.recovery) looks for sends nobody holds.
RECOVERY_EVERY = float(os.environ.get("RECOVERY_EVERY", "1"))
# SIGTERM: seconds a stopping process gives running turns to finish before it ends them
# with an error step (sessions_app.shutdown).
SHUTDOWN_GRACE = float(os.environ.get("SHUTDOWN_GRACE", "10"))
# Keep the user's ``env`` in the persisted user session (off: it is replaced by {}).
PERSIST_USER_ENV = _env_bool("PERSIST_USER_ENV", False)
# Engine.IO transport settings, announced to clients in the open packet.
SOCKETIO_PING_INTERVAL = float(os.environ.get("SOCKETIO_PING_INTERVAL", "25"))
SOCKETIO_PING_TIMEOUT = float(os.environ.get("SOCKETIO_PING_TIMEOUT", "20"))
SOCKETIO_MAX_PAYLOAD = int(os.environ.get("SOCKETIO_MAX_PAYLOAD", str(1_000_000)))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
# Serve /static/ from the ASGI app itself (the embedded default; put a CDN or a reverse
# proxy in front in production and set SERVE_STATIC=0).
SERVE_STATIC = _env_bool("SERVE_STATIC", True)
# Where the echo engine keeps its conversations (turn counts by engine session id).
ECHO_STATE_DIR = Path(os.environ.get("ECHO_STATE_DIR", VAR_DIR / "echo"))
# Photos in messages (media_app): the largest photo accepted, in bytes, and how many one
# message may carry. Uploads go over HTTP (POST /api/uploads/), not the socket.
MAX_IMAGE_BYTES = int(os.environ.get("MAX_IMAGE_BYTES", str(10_000_000)))
MAX_IMAGES_PER_MESSAGE = int(os.environ.get("MAX_IMAGES_PER_MESSAGE", "10"))
