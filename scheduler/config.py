"""Settings: one frozen object, read from flags, the environment and a config file.

Precedence, highest first: explicit overrides (CLI flags) > ``FLEETSCHED_<FIELD>`` environment
variables > the TOML config file (``$FLEETSCHED_CONFIG``, else
``$XDG_CONFIG_HOME/fleetsched/config.toml``) > the defaults below. The object is passed
explicitly to whatever needs it; there is no global instance.

URLs may carry passwords: print them only through :func:`redact_url`.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

from scheduler.errors import ConfigError

ENV_PREFIX = "FLEETSCHED_"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def default_state_dir() -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state") / "fleetsched"


def default_config_path() -> Path:
    explicit = os.environ.get(ENV_PREFIX + "CONFIG")
    if explicit:
        return Path(explicit)
    return _xdg("XDG_CONFIG_HOME", ".config") / "fleetsched" / "config.toml"


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
    # Embedded Redis durability: "everysec" loses at most ~1 s of acknowledged writes on a
    # machine crash (reconcile repairs that from SQL); "always" loses none.
    embedded_appendfsync: str = "everysec"
    # A claimed job is the worker's for this long unless a heartbeat renews it.
    lease_ms: int = 30_000
    # Heartbeats renew leases this often (a third of the lease leaves two chances to miss).
    heartbeat_ms: int = 10_000
    # Jobs one worker node runs at once (SSH jobs mostly wait on the network).
    worker_slots: int = 50
    # Fair-share reorder starts when the head of a due set is late by more than this.
    overload_threshold_ms: int = 5_000
    # SSH: strict host-key checking against this file; never auto-added.
    known_hosts: Path = field(default_factory=lambda: Path.home() / ".ssh" / "known_hosts")
    ssh_config: Path = field(default_factory=lambda: Path.home() / ".ssh" / "config")
    # Who is recorded as having asked for a change.
    operator: str = field(default_factory=_default_operator)
    log_level: str = "warning"

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
            if f.name.endswith("_url") and value:
                value = redact_url(value)
            out[f.name] = "" if value is None else str(value)
        return out


_FIELD_TYPES = {f.name: f.type for f in fields(Settings)}


def _coerce(name: str, raw: Any, source: str) -> Any:
    kind = _FIELD_TYPES[name]
    try:
        if kind == "int":
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
        raise ConfigError(f"{source}: {name} = {raw!r} is not valid ({exc})") from None


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
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


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> Settings:
    """Build the settings from overrides > environment > config file > defaults."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    values.update(_read_file(config_path or default_config_path()))
    values.update(_read_env(environ))
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw, f"option --{name.replace('_', '-')}")
    settings = Settings(**values)
    validate(settings)
    return settings


def validate(settings: Settings) -> None:
    """Reject contradictory or unusable settings loudly."""
    if settings.embedded_appendfsync not in ("everysec", "always"):
        raise ConfigError(
            f"embedded_appendfsync must be 'everysec' or 'always', not {settings.embedded_appendfsync!r}"
        )
    if settings.lease_ms < 1000:
        raise ConfigError(f"lease_ms = {settings.lease_ms} is too short (at least 1000 ms)")
    if settings.heartbeat_ms * 2 > settings.lease_ms:
        raise ConfigError(
            f"heartbeat_ms ({settings.heartbeat_ms}) must be at most half of lease_ms "
            f"({settings.lease_ms}), or a single late heartbeat loses the lease",
        )
    if settings.worker_slots < 1:
        raise ConfigError("worker_slots must be at least 1")


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy of ``settings`` with ``changes`` applied and validated."""
    new = dataclasses.replace(settings, **changes)
    validate(new)
    return new


def redact_url(url: str) -> str:
    """``redis://:secret@host:6379/0`` -> ``redis://:***@host:6379/0``; other URLs unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{user}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
