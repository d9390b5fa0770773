"""Settings: one frozen object, read from flags, the environment and a config file.

Precedence, highest first: explicit overrides (CLI flags) > ``FLEETSCHED_<FIELD>`` environment
variables > the TOML config file (``$FLEETSCHED_CONFIG``, else
``$XDG_CONFIG_HOME/fleetsched/config.toml``) > the defaults below. The object is passed
explicitly to whatever needs it; there is no global instance.

URLs may carry passwords: print them only through ``scheduler.redact`` (``redact_url``), as
``Settings.redacted`` does.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from scheduler.errors import ConfigError
from scheduler.redact import MASK, mask_url_rest, redact_url

ENV_PREFIX = "FLEETSCHED_"

# A claimed job is its worker's for this long unless a heartbeat renews it: the one default of
# Settings.lease_ms, a node's lease (workers.config.NodeConfig) and a Queue's.
LEASE_MS = 30_000
# The shortest lease a node may hold (a shorter one is lost to one slow round trip).
LEASE_MIN_MS = 1_000


def _xdg(var: str, fallback: str, environ: Mapping[str, str] | None = None) -> Path:
    value = (os.environ if environ is None else environ).get(var)
    return Path(value) if value else Path.home() / fallback


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state", environ) / "fleetsched"


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    explicit = (os.environ if environ is None else environ).get(ENV_PREFIX + "CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    return _xdg("XDG_CONFIG_HOME", ".config", environ) / "fleetsched" / "config.toml"


def _default_operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class Settings:
    """Everything fleetsched can be configured with. Defaults are for one node on a laptop."""

    # Where to reach Redis; None starts (or reuses) the embedded private redis-server.
    redis_url: str | None = None
    # SQLAlchemy URL of the system of record; None means a SQLite file in state_dir.
    database_url: str | None = None
    # Private files: the embedded Redis, the SQLite database, worker scratch space.
    state_dir: Path = field(default_factory=default_state_dir)
    # Hash-tag prefix of the queue's keys ({fs}:due:normal ...).
    queue_prefix: str = "fs"
    # Shards of the queue (docs/architecture.md, "Shards"): each task lives in one, by its id.
    # More than 1 spreads the queue over the masters of a Redis Cluster; every node and CLI of
    # one queue must say the same number (the queue remembers it and refuses another).
    queue_shards: int = 1
    # Embedded Redis durability: "everysec" loses at most ~1 s of acknowledged writes on a
    # machine crash (reconcile repairs that from SQL); "always" loses none.
    embedded_appendfsync: str = "everysec"
    # A claimed job is the worker's for this long unless a heartbeat renews it.
    lease_ms: int = LEASE_MS
    # Heartbeats renew leases this often (a third of the lease leaves two chances to miss).
    heartbeat_ms: int = 10_000
    # Jobs one worker node runs at once (SSH jobs mostly wait on the network).
    worker_slots: int = 50
    # Bytes kept of each command's stdout and of its stderr, twice: the first and the last this
    # many (the bytes between are cut and counted). A task's --executor-option capture_bytes
    # overrides it.
    output_cap_bytes: int = 8_192
    # Fair-share reorder starts when the head of a due set is late by more than this: small, so
    # a 4-host change is not stuck behind a few seconds of a big task's backlog either (a
    # reorder runs only when something new came due since the last one).
    overload_threshold_ms: int = 100
    # Fair share under overload: one share per "task", per submitting "operator", or "off"
    # (first come, first served: due order only).
    fair_share_by: str = "task"
    # The overload-handling lock's TTL; every reorder chunk renews it, so only a dead holder's
    # lock runs out, and the next worker takes over after this long.
    overload_lock_ms: int = 10_000
    # SSH: strict host-key checking against this file; never auto-added.
    known_hosts: Path = field(default_factory=lambda: Path.home() / ".ssh" / "known_hosts")
    ssh_config: Path = field(default_factory=lambda: Path.home() / ".ssh" / "config")
    # SSH key file(s) the workers offer after the agent's keys (comma-separated); None = only
    # the agent, ~/.ssh/config IdentityFile and ~/.ssh/id_*.
    ssh_identity_file: str | None = None
    # Who is recorded as having asked for a change.
    operator: str = field(default_factory=_default_operator)
    log_level: str = "warning"
    # Log lines of workers, the exporter and the server: "json" (one object per line), "text",
    # or "auto" (JSON when stderr is not a terminal).
    log_format: str = "auto"
    # A worker node's Prometheus endpoint (docs/guides/monitoring.md): 0 = off. The address is
    # loopback unless set otherwise: the metrics are for a scraper on this machine or a tunnel.
    metrics_port: int = 0
    metrics_address: str = "127.0.0.1"
    # `fleetsched server` serves HTTPS with this certificate (PEM, the chain after it) and key;
    # both or neither (docs/guides/server.md). None: plain HTTP, for loopback or behind a proxy.
    server_tls_cert: str | None = None
    server_tls_key: str | None = None
    # `fleetsched server` keeps its answers of the task list, a task's detail and its job pages
    # this long (scheduler/server/read_cache.py): polling dashboards share one answer; a request
    # with `Cache-Control: no-cache` (the CLI's) is always answered afresh. 0: keep nothing.
    server_read_cache_ms: int = 1000
    # `fleetsched server` sends a comment line on an event stream (a task's, a console page's)
    # that has said nothing this long, so that a proxy in between does not close it as idle:
    # below the proxy's idle timeout (nginx's proxy_read_timeout is 60 s by default). Each such
    # stream checks its token or session that often too: a revoked one ends it.
    server_stream_heartbeat_ms: int = 15_000
    # `fleetsched server` serves each principal (an API token, a person signed in) at most this
    # many `GET /tasks/{id}/output/stream` followers at once; one more is refused (429).
    server_output_streams_per_principal: int = 8
    # Notifications (docs/guides/notifications.md): targets told about every task and schedule
    # (webhook URLs, mailto:ADDRESS; TOML list or comma-separated), and the kinds they are told.
    notify: tuple[str, ...] = ()
    notify_on: tuple[str, ...] = ("failed", "aborted", "lost", "missed", "approval", "stopped")
    # SMTP server for mailto: targets; smtp_tls "none", "starttls" or "ssl".
    smtp_host: str = "localhost"
    smtp_port: int = 25
    smtp_from: str = "fleetsched@localhost"
    smtp_tls: str = "none"
    smtp_user: str | None = None
    smtp_password: str | None = None
    # Single sign-on for people (docs/guides/sso.md): the OpenID Connect issuer, this server's
    # client there and its secret (an @env:NAME or @file:/path reference keeps it out of the
    # config file; read when the first login starts). No issuer: API tokens only.
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    # The ID token's claim that lists a person's groups, and which value gives which role:
    # value -> "role" or "role:tenant" (a TOML table; in the environment value=role,...).
    # The first entry a person's claim matches wins, so list the strongest first.
    oidc_roles_claim: str = "groups"
    oidc_roles: tuple[tuple[str, str], ...] = ()
    # The callback URL registered at the issuer (https://host/api/v1/auth/callback); None: the
    # server's own address as each request names it (fine on loopback, not behind a proxy).
    oidc_redirect_url: str | None = None
    # How long a login lasts: the server-side session's lifetime, renewed by no request.
    oidc_session_minutes: int = 480
    # Remote mode (docs/guides/server.md, "Remote mode"): the CLI's commands go through this
    # `fleetsched server` (https://host:8443) with an API token, instead of opening the
    # database and Redis. The token is a secret: rather $FLEETSCHED_TOKEN or token_file (a
    # file holding it, read when a command runs) than the config file.
    server: str | None = None
    token: str | None = None
    token_file: str | None = None

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.state_dir / 'fleetsched.db'}"

    def redacted(self) -> dict[str, str]:
        """The settings as printable strings, with any password in a URL masked."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if (f.name.endswith("_url") or f.name == "server") and value:
                value = redact_url(value)
            elif is_secret(f.name) and value:
                value = MASK
            elif f.name == "oidc_roles":
                value = ", ".join(f"{claim}={role}" for claim, role in value)
            elif f.name == "notify":  # a webhook's path or query may be its secret
                value = ", ".join(mask_url_rest(redact_url(v)) for v in value)
            elif isinstance(value, tuple):
                value = ", ".join(value)
            out[f.name] = "" if value is None else str(value)
        return out


_FIELD_TYPES = {f.name: f.type for f in fields(Settings)}

# Each stream keeps twice output_cap_bytes; an attempt's output JSON stays within the queue's
# 256 KiB per event with the largest cap (stdout and stderr, head and tail: 4 x 32 KiB).
OUTPUT_CAP_MIN, OUTPUT_CAP_MAX = 256, 32_768
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("auto", "json", "text")
_PREFIX_RE = re.compile(r"[A-Za-z0-9_.-]{1,32}")

# Where each value came from, as ``load_settings_explained`` reports it.
Source = str  # "default" | "file <path>" | "env FLEETSCHED_X" | "option --x"
# Settings whose value is a secret: never printed, not even in an error about the value.
SECRET_SUFFIXES = ("_password", "_secret")
SECRET_NAMES = ("token",)


def is_secret(name: str) -> bool:
    """Whether the setting ``name`` holds a secret (masked wherever settings are shown)."""
    return name.endswith(SECRET_SUFFIXES) or name in SECRET_NAMES


def _pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    """A TOML table of strings, or ``key=value,...`` text (split at the last ``=``, so a key
    such as an LDAP group's DN may hold one), as ordered pairs."""
    if isinstance(raw, str):
        items = [item.rsplit("=", 1) for item in raw.split(",") if item.strip()]
        if any(len(item) != 2 for item in items):
            raise ValueError("expected key=value pairs separated by commas")
        raw = {k.strip(): v.strip() for k, v in items}
    if not isinstance(raw, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and v.strip()
            for k, v in raw.items()):
        raise ValueError("expected a table of non-empty strings")
    return tuple((k, v.strip()) for k, v in raw.items())


def _coerce(name: str, raw: Any, source: str) -> Any:
    if name not in _FIELD_TYPES:
        raise ConfigError(f"{source}: unknown setting {name!r}")
    kind = _FIELD_TYPES[name]
    try:
        if kind == "tuple[tuple[str, str], ...]":
            return _pairs(raw)
        if kind == "tuple[str, ...]":  # a TOML list of strings, or comma-separated text
            items = raw.split(",") if isinstance(raw, str) else raw
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise ValueError("expected a list of strings")
            return tuple(i.strip() for i in items if i.strip())
        if isinstance(raw, (bool, list, dict)):
            # TOML true/[..]/{..} are never a valid value of any setting (int(True) would be 1).
            raise ValueError(f"expected {kind.replace(' | None', '')}, got {type(raw).__name__}")
        if kind == "int":
            if isinstance(raw, float):
                raise ValueError("must be a whole number")
            value = int(raw)
            if value < 0:
                raise ValueError("must not be negative")
            return value
        if kind == "Path":
            return Path(str(raw)).expanduser()
        if kind == "str | None":
            return str(raw) if raw not in (None, "") else None
        return str(raw)
    except (TypeError, ValueError) as exc:
        shown = redact_url(raw) if name.endswith("_url") and isinstance(raw, str) else raw
        shown = MASK if is_secret(name) else shown
        raise ConfigError(f"{source}: {name} = {shown!r} is not valid ({exc})") from None


def _read_file(path: Path, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise ConfigError(f"config file {path} does not exist",
                              hint="create it, or drop --config / FLEETSCHED_CONFIG")
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}", hint="fix the TOML syntax") from None
    unknown = sorted(set(data) - set(_FIELD_TYPES))
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown setting {unknown[0]!r}",
            hint="see docs/reference/settings.md for the settings fleetsched knows",
        )
    return {k: _coerce(k, v, f"config file {path}") for k, v in data.items()}


def _read_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _FIELD_TYPES:
        key = ENV_PREFIX + name.upper()
        if key in environ:
            out[name] = _coerce(name, environ[key], f"environment {key}")
    return out


def load_settings_explained(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> tuple[Settings, dict[str, Source]]:
    """Like :func:`load_settings`, and also where each value came from."""
    environ = os.environ if environ is None else environ
    # A config file named explicitly (--config, FLEETSCHED_CONFIG) must exist; the default
    # location is optional.
    required = config_path is not None or bool(environ.get(ENV_PREFIX + "CONFIG"))
    path = config_path or default_config_path(environ)
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {name: "default" for name in _FIELD_TYPES}
    layers = [
        (_read_file(path, required), f"file {path}"),
        (_read_env(environ), "env"),
        ({name: _coerce(name, raw, f"option --{name.replace('_', '-')}")
          for name, raw in (overrides or {}).items() if raw is not None}, "option"),
    ]
    for layer, label in layers:
        for name, value in layer.items():
            values[name] = value
            sources[name] = {"env": f"env {ENV_PREFIX}{name.upper()}",
                             "option": f"option --{name.replace('_', '-')}"}.get(label, label)
    if "state_dir" not in values:
        values["state_dir"] = default_state_dir(environ)
    settings = Settings(**values)
    validate(settings)
    if settings.redis_url and sources["embedded_appendfsync"] != "default":
        raise ConfigError(
            f"embedded_appendfsync ({sources['embedded_appendfsync']}) applies only to the "
            f"embedded Redis, but redis_url is set ({sources['redis_url']})",
            hint="remove one of them; set appendfsync on your own Redis server itself",
        )
    return settings, sources


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> Settings:
    """Build the settings from overrides > environment > config file > defaults."""
    return load_settings_explained(overrides, environ, config_path)[0]


def validate(settings: Settings) -> None:
    """Reject contradictory or unusable settings loudly, with one line naming the setting."""
    if settings.embedded_appendfsync not in ("everysec", "always"):
        raise ConfigError(
            f"embedded_appendfsync must be 'everysec' or 'always', "
            f"not {settings.embedded_appendfsync!r}"
        )
    if settings.heartbeat_ms < 100:
        raise ConfigError(f"heartbeat_ms = {settings.heartbeat_ms} is too short (at least 100 ms)")
    check_lease(settings.lease_ms, settings.heartbeat_ms)
    if settings.worker_slots < 1:
        raise ConfigError("worker_slots must be at least 1")
    if not OUTPUT_CAP_MIN <= settings.output_cap_bytes <= OUTPUT_CAP_MAX:
        raise ConfigError(f"output_cap_bytes = {settings.output_cap_bytes} is out of range "
                          f"({OUTPUT_CAP_MIN} to {OUTPUT_CAP_MAX})")
    if settings.fair_share_by not in ("task", "operator", "off"):
        raise ConfigError(f"fair_share_by must be 'task', 'operator' or 'off', "
                          f"not {settings.fair_share_by!r}")
    if settings.overload_lock_ms < 100:
        raise ConfigError(f"overload_lock_ms = {settings.overload_lock_ms} is too short "
                          "(at least 100 ms)")
    if not 0 <= settings.server_read_cache_ms <= 60_000:
        raise ConfigError(f"server_read_cache_ms = {settings.server_read_cache_ms} is out of "
                          "range (0 to 60000)")
    if not 100 <= settings.server_stream_heartbeat_ms <= 300_000:
        raise ConfigError(f"server_stream_heartbeat_ms = {settings.server_stream_heartbeat_ms} "
                          "is out of range (100 to 300000)")
    if not 1 <= settings.server_output_streams_per_principal <= 1000:
        raise ConfigError("server_output_streams_per_principal = "
                          f"{settings.server_output_streams_per_principal} is out of range "
                          "(1 to 1000)")
    if settings.log_level.lower() not in LOG_LEVELS:
        raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}, "
                          f"not {settings.log_level!r}")
    if settings.log_format not in LOG_FORMATS:
        raise ConfigError(f"log_format must be one of {', '.join(LOG_FORMATS)}, "
                          f"not {settings.log_format!r}")
    if settings.metrics_port > 65535:
        raise ConfigError(f"metrics_port = {settings.metrics_port} is not a TCP port (0 = off, "
                          "1-65535)")
    if not settings.metrics_address.strip():
        raise ConfigError("metrics_address must not be empty", hint="127.0.0.1 is the default")
    if bool(settings.server_tls_cert) != bool(settings.server_tls_key):
        given, missing = (("server_tls_cert", "server_tls_key") if settings.server_tls_cert
                          else ("server_tls_key", "server_tls_cert"))
        raise ConfigError(f"{given} is set but {missing} is not: TLS needs both",
                          hint="give the certificate and its private key, or neither")
    if not 1 <= settings.queue_shards <= 64:
        raise ConfigError(f"queue_shards = {settings.queue_shards} must be 1-64",
                          hint="1 (the default) keeps the whole queue in one hash slot")
    if not _PREFIX_RE.fullmatch(settings.queue_prefix):
        raise ConfigError(f"queue_prefix {settings.queue_prefix!r} must be 1-32 letters, digits, "
                          "'_', '.' or '-' (it becomes the keys' {hash tag})")
    if settings.smtp_tls not in ("none", "starttls", "ssl"):
        raise ConfigError(f"smtp_tls must be 'none', 'starttls' or 'ssl', not {settings.smtp_tls!r}")
    for name in ("redis_url", "database_url"):
        url = getattr(settings, name)
        if url and "://" not in url:
            raise ConfigError(f"{name} {redact_url(url)!r} is not a URL (scheme://...)")
    if settings.database_url:
        _check_database_driver(settings.database_url)
    _check_oidc(settings)
    _check_remote(settings)


def _check_remote(settings: Settings) -> None:
    """Remote mode: an http(s) URL without credentials in it, and one way to give the token."""
    from urllib.parse import urlsplit

    if settings.token and settings.token_file:
        raise ConfigError("token and token_file are both set: give the API token one way",
                          hint="keep token_file (or $FLEETSCHED_TOKEN) and drop the other")
    if settings.server is None:
        return
    parts = urlsplit(settings.server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"server {redact_url(settings.server)!r} is not an http(s) URL",
                          hint="e.g. --server https://fleetsched.example.org:8443")
    if parts.username or parts.password:
        raise ConfigError(f"server {redact_url(settings.server)!r} holds credentials",
                          hint="give the API token as token, token_file or $FLEETSCHED_TOKEN")


def _check_oidc(settings: Settings) -> None:
    """Single sign-on needs an issuer and a client id together, over HTTPS unless the issuer
    is on this machine (a test provider)."""
    from urllib.parse import urlsplit

    if bool(settings.oidc_issuer) != bool(settings.oidc_client_id):
        raise ConfigError("oidc_issuer and oidc_client_id go together: single sign-on needs both",
                          hint="see docs/guides/sso.md")
    if settings.oidc_session_minutes < 1:
        raise ConfigError("oidc_session_minutes must be at least 1")
    for name in ("oidc_issuer", "oidc_redirect_url"):
        url = getattr(settings, name)
        if not url:
            continue
        parts = urlsplit(url)
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ConfigError(f"{name} {url!r} must be an https:// URL (http:// only on "
                              "loopback, for a test provider)")


# The Python package each PostgreSQL driver name of a SQLAlchemy URL imports; a bare
# postgresql:// means psycopg (scheduler.record.engine), the driver of the [postgres] extra.
_PG_DRIVERS = {"postgresql": "psycopg", "postgresql+psycopg": "psycopg",
               "postgresql+psycopg2": "psycopg2", "postgresql+psycopg2cffi": "psycopg2cffi",
               "postgresql+pg8000": "pg8000", "postgresql+asyncpg": "asyncpg"}


def check_lease(lease_ms: int, heartbeat_ms: int, *, lease: str = "lease_ms") -> None:
    """The one rule of a lease, for the settings and for a node (whose ``--lease`` may differ):
    at least ``LEASE_MIN_MS``, and at least two heartbeats long. ``lease`` names it in errors."""
    if lease_ms < LEASE_MIN_MS:
        raise ConfigError(f"{lease} = {lease_ms} is too short (at least {LEASE_MIN_MS} ms)")
    if heartbeat_ms * 2 > lease_ms:
        raise ConfigError(
            f"heartbeat_ms ({heartbeat_ms}) must be at most half of {lease} "
            f"({lease_ms}), or a single late heartbeat loses the lease",
            hint=f"raise {lease} or lower heartbeat_ms (a third of the lease is the default)",
        )


def _check_database_driver(url: str) -> None:
    """A PostgreSQL URL whose driver is not installed: one line naming it and the extra."""
    import importlib.util

    scheme = url.split("://", 1)[0].lower()
    if scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        return
    scheme = scheme.replace("postgres+", "postgresql+") if scheme != "postgres" else "postgresql"
    module = _PG_DRIVERS.get(scheme, scheme.split("+", 1)[-1])
    if importlib.util.find_spec(module) is not None:
        return
    if module == "psycopg":
        raise ConfigError("database_url is a PostgreSQL URL but its driver psycopg is not "
                          "installed: pip install 'fleetsched[postgres]'",
                          hint="or use a SQLite database_url (sqlite:///<file>)")
    raise ConfigError(f"database_url names the PostgreSQL driver {module}, which is not "
                      "installed: pip install 'fleetsched[postgres]' and use postgresql+psycopg://",
                      hint=f"or pip install {module} to keep {scheme}://")


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy of ``settings`` with ``changes`` applied and validated."""
    new = dataclasses.replace(settings, **changes)
    validate(new)
    return new

