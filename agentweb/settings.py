"""agentweb settings: everything comes from the environment, with defaults that just run.

See SPEC.md §4 for the variables outside tools rely on.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from pathlib import Path

import csp.constants
import dj_database_url

from foundation.environment import env_bool, env_float, env_int, env_list, env_str
from foundation.private import read_or_create

BASE_DIR = Path(__file__).resolve().parent.parent


def _secret_key() -> str:
    """Use DJANGO_SECRET_KEY, else a random key kept in a git-ignored file beside the code
    (made 0600 from the start; processes starting at once agree on one key)."""
    if key := env_str("DJANGO_SECRET_KEY"):
        return key
    return read_or_create(BASE_DIR / ".agentweb-secret", lambda: secrets.token_urlsafe(50))


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")

INSTALLED_APPS = [
    "daphne",
    "axes",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "channels",
    "sessions.apps.ChatConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers locked-out sign-ins
]

# Content-Security-Policy (django-csp): scripts and styles from this site's own files only: no
# inline script or style, no eval (htmx is told so: templates/base.html); the socket is
# this site's own (Chromium counts ws: and wss: of the page's host as 'self').
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp.constants.SELF],
        "script-src": [csp.constants.SELF],
        "style-src": [csp.constants.SELF],
        "img-src": [csp.constants.SELF, "data:"],
        "connect-src": [csp.constants.SELF],
        "object-src": [csp.constants.NONE],
        "base-uri": [csp.constants.NONE],
        "form-action": [csp.constants.SELF],
        "frame-ancestors": [csp.constants.NONE],
    }
}

ROOT_URLCONF = "agentweb.urls"
ASGI_APPLICATION = "agentweb.asgi.application"

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

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # Keep connections: opening one per query cost most of the database thread under load.
        conn_max_age=env_int("AGENTWEB_DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps the connections instead
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # Django's connection pool (psycopg_pool): every database call of the server is a
            # request of its own to Django, which takes a connection and gives it back.
            # Its calls run on a few threads (the one thread, and the loop's pool for a
            # prompt's short calls), so a call waits for a connection only when the server
            # is away: it fails after `timeout` seconds, and what must not be lost tries again.
            # With CONN_HEALTH_CHECKS (above), Django has the pool check each connection as it
            # hands it out: one the server dropped (a restart, an idle timeout) is replaced,
            # never given to a call.
            "pool": {
                "min_size": env_int("AGENTWEB_PG_POOL_MIN", 2),
                "max_size": env_int("AGENTWEB_PG_POOL_MAX", 20),
                "timeout": env_float("AGENTWEB_PG_POOL_TIMEOUT", 3.0),
            },
            # The prompt path sends the same statements again and again: bound on the server
            # and prepared after a few runs, PostgreSQL plans each once a connection. 0 for no
            # prepared statements (a pooler in transaction mode).
            "server_side_binding": True,
            "prepare_threshold": env_int("AGENTWEB_PG_PREPARE_THRESHOLD", 5) or None,
        }
    )
# The threads a process gives a prompt's short database calls (foundation/database.py): one on
# SQLite (one writer: more would wait on its lock), four on PostgreSQL.
AGENTWEB_SHORT_CALL_THREADS = env_int(
    "AGENTWEB_SHORT_CALL_THREADS",
    1 if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3" else 4,
)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # WAL lets readers go on while a generation writes; IMMEDIATE avoids
        # "database is locked" on lock upgrades; timeout waits instead of failing.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # A file test database: async tests and the browser tests' server process share it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / ".test-db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# With REDIS_URL: "pubsub" or "queued" for one of channels-redis's layers instead of the bus.
AGENTWEB_CHANNEL_LAYER = env_str("AGENTWEB_CHANNEL_LAYER")
if REDIS_URL := env_str("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout, the same as channels-redis's
                # BRPOP wait: a longer timeout keeps idle receives from failing.
                # redis-py 8's pool refuses (not waits for) a connection past its limit, 100 by
                # default: 200 tabs connecting at once exceeded it.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 30,
                        "max_connections": env_int("AGENTWEB_REDIS_MAX_CONNECTIONS", 1000),
                    }
                ],
                # channels-redis counts capacity per process (its channels share one list).
                "capacity": env_int("AGENTWEB_CHANNEL_CAPACITY", 10_000),
                "expiry": 60,
            },
        }
    }
    # The bus (foundation/layers/bus.py), chosen by measurement (docs/ARCHITECTURE.md): a process
    # delivers its own messages itself and sends other processes one batch of group messages
    # at a time. AGENTWEB_CHANNEL_LAYER=pubsub keeps channels-redis's Pub/Sub layer (one Redis
    # message a message, a subscription a socket); =queued its list-based layer above.
    if AGENTWEB_CHANNEL_LAYER == "pubsub":
        CHANNEL_LAYERS["default"] = {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    elif AGENTWEB_CHANNEL_LAYER != "queued":
        CHANNEL_LAYERS["default"] = {
            "BACKEND": "foundation.layers.bus.BusChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000},
        }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "foundation.layers.memory.MemoryChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # sign-in throttling (django-axes)
    "django.contrib.auth.backends.ModelBackend",
]
# After this many failed sign-ins for one username from one address, that pair waits.
AXES_FAILURE_LIMIT = env_int("AGENTWEB_LOGIN_FAILURES", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AGENTWEB_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The reverse proxies in front that append to X-Forwarded-For (README: "Several processes"):
# failures then count by the client's own address, not the proxy's that every user shares.
AGENTWEB_TRUSTED_PROXIES = env_int("AGENTWEB_TRUSTED_PROXIES", 0)
AXES_CLIENT_IP_CALLABLE = "foundation.proxies.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
AXES_VERBOSE = False
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# agentweb speaks English only, and has no translations: without Django's translation
# machinery each value a template shows is a lookup fewer (a prompt's entry renders in about
# 15 % less time; docs/PERFORMANCE.md).
USE_I18N = False
USE_TZ = True

# Files attached to messages: on Django's storage API, the file system by default, under a
# path of their own (never under STATIC_ROOT: they are served to their owner only, by a view).
AGENTWEB_ATTACHMENTS_DIR = env_str("AGENTWEB_ATTACHMENTS_DIR", str(BASE_DIR / "var" / "files"))
AGENTWEB_MAX_ATTACHMENT_BYTES = env_int("AGENTWEB_MAX_ATTACHMENT_BYTES", 10 * 1024 * 1024)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "attachments": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": AGENTWEB_ATTACHMENTS_DIR, "base_url": None},
    },
}

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_str("DJANGO_STATIC_ROOT") or None
# Serve straight from the finders: `make run` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {
        # Written by the root logger's handler (daphne's: a line each, with the time), not by a
        # handler of its own as well (each line twice).
        "sessions": {"level": env_str("AGENTWEB_LOG_LEVEL", "INFO")},
        # The SDK's HTTP client says each model request at INFO, a line per prompt in daphne's
        # log (which sets the root logger to INFO); its warnings and errors still show.
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}

# --- agentweb -------------------------------------------------------------
# --- served over HTTPS, usually behind a proxy (README: "Several processes") -------------
# DJANGO_HTTPS=1 turns on what `check --deploy` asks for; each part can be turned off.
HTTPS = env_bool("DJANGO_HTTPS")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")
# The header a TLS-terminating proxy sets (nginx: proxy_set_header X-Forwarded-Proto $scheme).
if proxy_header := env_str(
    "DJANGO_SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO,https" if HTTPS else ""
):
    SECURE_PROXY_SSL_HEADER = tuple(proxy_header.split(",", 1))
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", HTTPS)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", HTTPS)

ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL") or None

# The models this server can run, each with its context window and maximum output (the
# `max_tokens` agentweb asks for; a request must fit input + max_tokens in the window).
# Claude models are offered only when ANTHROPIC_API_KEY is set.
CLAUDE_MODELS = {
    "claude-sonnet-4-5": {"label": "Claude Sonnet 4.5", "window": 200_000, "max_output": 16_384},
    "claude-opus-4-1": {"label": "Claude Opus 4.1", "window": 200_000, "max_output": 16_384},
    "claude-haiku-4-5": {"label": "Claude Haiku 4.5", "window": 200_000, "max_output": 16_384},
}
AGENTWEB_MODELS = {
    "local": {
        "label": "Offline model (local)",
        # The offline model has no real limit; a window makes it behave as a model does
        # (and lets tests make it small).
        "window": env_int("AGENTWEB_LOCAL_WINDOW", 200_000),
        "max_output": env_int("AGENTWEB_LOCAL_MAX_OUTPUT", 4_096),
    },
    **CLAUDE_MODELS,
}
# Which Claude models to offer (with a key): ids of the table above, or others, which get a
# 200,000-token window and 8,192 tokens of output.
AGENTWEB_CLAUDE_MODELS = env_list("AGENTWEB_CLAUDE_MODELS", ",".join(CLAUDE_MODELS))
# What a million tokens cost, in US dollars, per model: input, output, and the prompt cache's
# reads and writes. A model without a price shows its tokens and no cost. AGENTWEB_PRICES (a
# JSON object of the same shape) adds models or replaces their prices.
AGENTWEB_PRICES: dict[str, dict[str, float]] = {
    "claude-opus-4-1": {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75},
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
    "local": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0},
    **json.loads(env_str("AGENTWEB_PRICES") or "{}"),
}
AGENTWEB_MODEL = env_str("AGENTWEB_MODEL") or (
    AGENTWEB_CLAUDE_MODELS[0] if ANTHROPIC_API_KEY and AGENTWEB_CLAUDE_MODELS else "local"
)
if AGENTWEB_MODEL != "local" and AGENTWEB_MODEL not in AGENTWEB_CLAUDE_MODELS:
    AGENTWEB_CLAUDE_MODELS.insert(0, AGENTWEB_MODEL)
# Room kept free in the window besides the maximum output: estimates are estimates.
AGENTWEB_WINDOW_MARGIN = env_float("AGENTWEB_WINDOW_MARGIN", 0.03)
# From this share of the window on, the page suggests /handoff.
AGENTWEB_HANDOFF_SUGGEST_AT = env_float("AGENTWEB_HANDOFF_SUGGEST_AT", 0.8)
# A model stream that sends nothing for this long (the API pings every few seconds) has stalled.
AGENTWEB_STALL_SECONDS = env_float("AGENTWEB_STALL_SECONDS", 120.0)
# The SDK retries 429/529/connection errors itself; 0 turns that off.
AGENTWEB_MAX_RETRIES = env_int("AGENTWEB_MAX_RETRIES", 2)
# Seconds between two tokens of the offline model: slow enough to watch, and to cancel.
AGENTWEB_LOCAL_TOKEN_DELAY = env_float("AGENTWEB_LOCAL_TOKEN_DELAY", 0.03)
# Most entries an imported session file may have.
AGENTWEB_MAX_IMPORT_ENTRIES = env_int("AGENTWEB_MAX_IMPORT_ENTRIES", 100_000)
# Most entries a fork may copy (a branch of an imported session can be as long as the file).
AGENTWEB_MAX_FORK_ENTRIES = env_int("AGENTWEB_MAX_FORK_ENTRIES", 100_000)
# Rows per transaction of a large fork or purge: other users' writes wait at most one batch.
AGENTWEB_WRITE_BATCH = env_int("AGENTWEB_WRITE_BATCH", 500)
# Longest message accepted from the chat box, in characters.
AGENTWEB_MAX_MESSAGE_CHARS = env_int("AGENTWEB_MAX_MESSAGE_CHARS", 100_000)
# Longest body of a user's prompt template, in characters (what it fills in to is held to the
# message's limit too).
AGENTWEB_MAX_TEMPLATE_CHARS = env_int("AGENTWEB_MAX_TEMPLATE_CHARS", 20_000)
# Caps that keep one user (or one flooding socket) from running up the operator's API key.
AGENTWEB_MAX_QUEUED_PROMPTS = env_int("AGENTWEB_MAX_QUEUED_PROMPTS", 10)
AGENTWEB_MAX_GENERATIONS_PER_USER = env_int("AGENTWEB_MAX_GENERATIONS_PER_USER", 3)
AGENTWEB_FRAMES_PER_SECOND = env_float("AGENTWEB_FRAMES_PER_SECOND", 5.0)
AGENTWEB_FRAME_BURST = env_int("AGENTWEB_FRAME_BURST", 20)
# Largest WebSocket frame taken, in bytes: well under daphne's own limit (1 MiB), which closes
# the socket without a word, and over the largest message of the longest length as JSON writes
# it (100,000 characters, each escaped to at most six bytes).
AGENTWEB_MAX_FRAME_BYTES = env_int("AGENTWEB_MAX_FRAME_BYTES", 655_360)
# Streamed text goes to the page in batches at most this far apart (fewer, larger frames).
AGENTWEB_DELTA_BATCH_SECONDS = env_float("AGENTWEB_DELTA_BATCH_SECONDS", 0.03)
# At most this many batches a second leave one process, all its generations together: with many
# at once, each batches longer. channels-redis's own layers relay a few thousand messages a
# second per process (one receive loop, a Redis message each); past that, messages queue until
# channels overflow. The bus sends other processes one Redis message per batch of them.
_PER_MESSAGE_LAYER = bool(REDIS_URL) and AGENTWEB_CHANNEL_LAYER in ("pubsub", "queued")
AGENTWEB_RELAY_MESSAGES_PER_SECOND = env_float(
    "AGENTWEB_RELAY_MESSAGES_PER_SECOND", 1500.0 if _PER_MESSAGE_LAYER else 10_000.0
)
# A streaming reply is saved this often (seconds, or characters), so a crash keeps it.
AGENTWEB_PARTIAL_SAVE_SECONDS = env_float("AGENTWEB_PARTIAL_SAVE_SECONDS", 2.0)
AGENTWEB_PARTIAL_SAVE_CHARS = env_int("AGENTWEB_PARTIAL_SAVE_CHARS", 4_000)
AGENTWEB_GENERATION_LEASE = env_float("AGENTWEB_GENERATION_LEASE", 15.0)  # a claim, unrenewed
AGENTWEB_UNDO_DELETE_SECONDS = env_int("AGENTWEB_UNDO_DELETE_SECONDS", 86_400)  # then purged
# The tool loop's rounds in one reply, and calls in one round (more get an error result).
AGENTWEB_MAX_TOOL_ROUNDS = env_int("AGENTWEB_MAX_TOOL_ROUNDS", 8)
AGENTWEB_MAX_TOOL_CALLS = env_int("AGENTWEB_MAX_TOOL_CALLS", 32)
AGENTWEB_RECALL_ENTRIES = env_int("AGENTWEB_RECALL_ENTRIES", 8)  # what one recall returns at most
AGENTWEB_RECALL_CHARS = env_int("AGENTWEB_RECALL_CHARS", 4_000)  # and characters of their text
# MCP (README, "Tools (MCP)"): the operator's file; a call's, a start's and a question's longest
# wait (s); a result's characters the model reads and the session keeps; an image's bytes; the
# longest message (bytes) a stdio server may send (`sessions/mcp/bounded.py`).
AGENTWEB_MCP_SERVERS = env_str("AGENTWEB_MCP_SERVERS")
AGENTWEB_MCP_TIMEOUT = env_float("AGENTWEB_MCP_TIMEOUT", 120.0)
AGENTWEB_MCP_CONNECT_SECONDS = env_float("AGENTWEB_MCP_CONNECT_SECONDS", 30.0)
AGENTWEB_MCP_APPROVAL_SECONDS = env_float("AGENTWEB_MCP_APPROVAL_SECONDS", 600.0)
AGENTWEB_MCP_RESULT_CHARS = env_int("AGENTWEB_MCP_RESULT_CHARS", 20_000)
AGENTWEB_MCP_KEPT_CHARS = env_int("AGENTWEB_MCP_KEPT_CHARS", 1_000_000)
AGENTWEB_MCP_IMAGE_BYTES = env_int("AGENTWEB_MCP_IMAGE_BYTES", 5_000_000)
AGENTWEB_MCP_MESSAGE_BYTES = env_int("AGENTWEB_MCP_MESSAGE_BYTES", 8_000_000)
# Todo items open for this many replies without an update: the model gets a reminder (0: never).
AGENTWEB_TODO_REMINDER_TURNS = env_int("AGENTWEB_TODO_REMINDER_TURNS", 3)
# The cheap model that writes a session's title, when a user prefers generated titles.
AGENTWEB_TITLE_MODEL = env_str("AGENTWEB_TITLE_MODEL") or "claude-haiku-4-5"
AGENTWEB_HANDOFF_DRAFTS = env_bool("AGENTWEB_HANDOFF_DRAFTS", True)  # written ahead (0: never)
AGENTWEB_MAX_AUTO_HANDOFFS = env_int("AGENTWEB_MAX_AUTO_HANDOFFS", 5)  # in a row, then it waits
