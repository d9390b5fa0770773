"""Settings: precedence (flags > env > file > defaults), loud validation, and redaction of every
password fleetsched could print (config show, error lines, driver exceptions)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli.app import main
from scheduler.config import Settings, load_settings, load_settings_explained, replace
from scheduler.errors import ConfigError
from scheduler.redact import redact_exception, redact_text, redact_url


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def run_cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``fleetsched`` through ``main()`` (the console script's own error handling) with
    stdout and stderr captured: (exit code, stdout, stderr)."""
    runner = CliRunner()
    with runner.isolation(env=env) as (out, err, _):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


# ----------------------------------------------------------------------------- precedence


def test_each_layer_overrides_the_one_below_flags_env_file_defaults(tmp_path: Path) -> None:
    # Given a file setting three values, the environment two of them, and a flag one
    config = write_toml(tmp_path / "c.toml",
                        'queue_prefix = "file"\nworker_slots = 7\nlease_ms = 40000\n')
    environ = {"FLEETSCHED_QUEUE_PREFIX": "env", "FLEETSCHED_WORKER_SLOTS": "9"}
    # When the settings are loaded
    settings, sources = load_settings_explained({"queue_prefix": "flag"}, environ, config)
    # Then the highest layer wins for each, and untouched settings keep their defaults
    assert settings.queue_prefix == "flag"
    assert settings.worker_slots == 9
    assert settings.lease_ms == 40000
    assert settings.heartbeat_ms == Settings().heartbeat_ms
    assert sources["queue_prefix"] == "option --queue-prefix"
    assert sources["worker_slots"] == "env FLEETSCHED_WORKER_SLOTS"
    assert sources["lease_ms"] == f"file {config}"
    assert sources["heartbeat_ms"] == "default"


def test_a_flag_left_unset_does_not_hide_the_environment(tmp_path: Path) -> None:
    environ = {"FLEETSCHED_REDIS_URL": "redis://env-host:6379/0", "XDG_CONFIG_HOME": str(tmp_path)}
    settings = load_settings({"redis_url": None}, environ)
    assert settings.redis_url == "redis://env-host:6379/0"


def test_the_config_file_is_found_through_fleetsched_config_and_xdg(tmp_path: Path) -> None:
    named = write_toml(tmp_path / "named.toml", "worker_slots = 3\n")
    assert load_settings(environ={"FLEETSCHED_CONFIG": str(named)}).worker_slots == 3
    xdg = tmp_path / "xdg"
    (xdg / "fleetsched").mkdir(parents=True)
    write_toml(xdg / "fleetsched" / "config.toml", "worker_slots = 4\n")
    settings = load_settings(environ={"XDG_CONFIG_HOME": str(xdg),
                                      "XDG_STATE_HOME": str(tmp_path / "state")})
    assert settings.worker_slots == 4
    assert settings.state_dir == tmp_path / "state" / "fleetsched"


def test_a_config_file_named_explicitly_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={}, config_path=tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={"FLEETSCHED_CONFIG": str(tmp_path / "missing.toml")})


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lease_ms = 3O000\n", "at line 1"),  # a letter O instead of a zero
        ('leese_ms = 30000\n', "unknown setting 'leese_ms'"),
        ("worker_slots = true\n", "expected int, got bool"),
        ("lease_ms = 1.5\n", "whole number"),
        ("lease_ms = -5\n", "must not be negative"),
        ('queue_prefix = ["a"]\n', "got list"),
        ('embedded_appendfsync = "no"\n', "'everysec' or 'always'"),
        ('queue_prefix = "f{s}"\n', "queue_prefix"),
        ('log_level = "loud"\n', "log_level"),
        ('redis_url = "localhost:6379"\n', "not a URL"),
    ],
)
def test_a_bad_config_file_fails_with_one_line_naming_the_problem(
    tmp_path: Path, text: str, expected: str
) -> None:
    config = write_toml(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={}, config_path=config)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="environment FLEETSCHED_LEASE_MS: lease_ms = 'soon'"):
        load_settings(environ={"FLEETSCHED_LEASE_MS": "soon"}, config_path=None)


def test_the_metrics_and_log_settings_come_from_the_environment_and_are_checked() -> None:
    settings = load_settings(environ={"FLEETSCHED_METRICS_PORT": "9466",
                                      "FLEETSCHED_METRICS_ADDRESS": "0.0.0.0",
                                      "FLEETSCHED_LOG_FORMAT": "json"}, config_path=None)
    assert (settings.metrics_port, settings.metrics_address, settings.log_format) == (
        9466, "0.0.0.0", "json")
    assert (Settings().metrics_port, Settings().metrics_address, Settings().log_format) == (
        0, "127.0.0.1", "auto")
    with pytest.raises(ConfigError, match="metrics_port = 70000 is not a TCP port"):
        load_settings(environ={"FLEETSCHED_METRICS_PORT": "70000"}, config_path=None)
    with pytest.raises(ConfigError, match="log_format must be one of auto, json, text"):
        load_settings(environ={"FLEETSCHED_LOG_FORMAT": "yaml"}, config_path=None)


def test_a_heartbeat_longer_than_half_the_lease_is_a_contradiction() -> None:
    with pytest.raises(ConfigError, match=r"heartbeat_ms \(20000\) must be at most half"):
        load_settings({"heartbeat_ms": 20000}, environ={})
    with pytest.raises(ConfigError, match="at most half"):
        replace(Settings(), lease_ms=5000)


def test_embedded_durability_set_together_with_an_external_redis_is_a_contradiction(
    tmp_path: Path,
) -> None:
    config = write_toml(tmp_path / "c.toml", 'embedded_appendfsync = "always"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"FLEETSCHED_REDIS_URL": "redis://:pw@h:6379/0"},
                      config_path=config)
    assert "applies only to the embedded Redis" in str(caught.value)
    assert "pw@" not in str(caught.value)


def test_an_invalid_setting_on_the_command_line_exits_2_with_error_and_hint_lines(
    tmp_path: Path,
) -> None:
    code, out, err = run_cli(["config", "show"],
                             env={"FLEETSCHED_HEARTBEAT_MS": "20000",
                                  "FLEETSCHED_CONFIG": None, "XDG_CONFIG_HOME": str(tmp_path)})
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("error: heartbeat_ms (20000)")
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in err


# ------------------------------------------------------------------------------ redaction


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://app:s3cret@[::1]:6380/2", "redis://app:***@[::1]:6380/2"),
        ("rediss://:p@ss@host/0", "rediss://:***@host/0"),  # an unescaped @ in the password
        ("redis://:s3cret@host:notaport/0", "redis://:***@host:notaport/0"),
        ("unix:///run/r.sock?db=1&password=s3cret", "unix:///run/r.sock?db=1&password=***"),
        ("postgresql+psycopg://bob:s3cr%40t@db:5432/fs?sslmode=require",
         "postgresql+psycopg://bob:***@db:5432/fs?sslmode=require"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("sqlite:////var/lib/fs.db", "sqlite:////var/lib/fs.db"),
    ],
)
def test_redact_url_masks_the_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_config_show_never_prints_a_password_in_any_format(tmp_path: Path) -> None:
    env = {"FLEETSCHED_REDIS_URL": "redis://:red-s3cret@cache:6379/0",
           "FLEETSCHED_CONFIG": None, "XDG_CONFIG_HOME": str(tmp_path)}
    flags = ["--database-url", "postgresql+psycopg://bob:pg-s3cret@db/fs"]
    for fmt in ("table", "json", "csv"):
        code, out, err = run_cli([*flags, "config", "show", "--output", fmt], env=env)
        assert code == 0, err
        assert "s3cret" not in out + err
        assert "redis://:***@cache:6379/0" in out
        assert "postgresql+psycopg://bob:***@db/fs" in out
    code, out, _ = run_cli([*flags, "config", "show", "--output", "json"], env=env)
    rows = {row["setting"]: row for row in json.loads(out)}
    assert rows["redis_url"]["source"] == "env FLEETSCHED_REDIS_URL"
    assert rows["database_url"]["source"] == "option --database-url"
    assert rows["lease_ms"] == {"setting": "lease_ms", "value": "30000", "source": "default"}


def test_a_database_connection_error_becomes_one_line_without_the_password() -> None:
    # Given a real SQLAlchemy + psycopg error: multi-line, and nothing listens on port 1
    from tests.servers import free_port

    url = f"postgresql+psycopg://bob:pg-s3cret@127.0.0.1:{free_port()}/fs"
    engine = sa.create_engine(url)
    with pytest.raises(sa.exc.OperationalError) as caught:
        engine.connect()
    engine.dispose()
    assert "\n" in str(caught.value)
    # When it is made printable
    shown = redact_exception(caught.value, url)
    # Then it is one line that still says what happened, with no password in it
    assert "\n" not in shown
    assert "Connection refused" in shown
    assert "pg-s3cret" not in shown


def test_redact_text_masks_urls_query_secrets_and_libpq_pairs_in_free_text() -> None:
    text = ("failed: redis://u:a1b2c3@h:1/0\nDSN host=db password='x y' user=bob; "
            "also unix:///s.sock?password=zz9 and the bare secret a1b2c3")
    shown = redact_text(text, "redis://u:a1b2c3@h:1/0")
    for secret in ("a1b2c3", "x y", "zz9"):
        assert secret not in shown
    assert "redis://u:***@h:1/0" in shown
    assert "\n" not in shown


def test_logs_through_the_redacting_filter_never_show_a_url_password(tmp_path: Path) -> None:
    import io
    import logging

    from scheduler.redact import UrlRedactingFilter

    # Given a handler with the filter, and settings whose URLs carry passwords
    settings = load_settings({"redis_url": "redis://:log-s3cret@cache:6379/0",
                              "database_url": "postgresql+psycopg://bob:db-s3cret@db/fs"},
                             environ={"XDG_CONFIG_HOME": str(tmp_path)})
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(UrlRedactingFilter(settings))
    log = logging.getLogger("fleetsched.test.redaction")
    log.addHandler(handler)
    log.propagate = False
    try:
        # When a message, its arguments and a traceback mention them
        log.warning("connecting to %s", settings.redis_url)
        try:
            raise RuntimeError(f"lost {settings.database_url}; password was db-s3cret")
        except RuntimeError:
            log.exception("database trouble")
    finally:
        log.removeHandler(handler)
    # Then only masked forms were written
    written = stream.getvalue()
    assert "s3cret" not in written
    assert "redis://:***@cache:6379/0" in written
    assert "postgresql+psycopg://bob:***@db/fs" in written
    assert "Traceback" in written


# ----------------------------------------------------------------------- single sign-on


def test_single_sign_on_settings_read_the_role_table_and_never_show_the_secret(
        tmp_path: Path) -> None:
    # Given a config file with the issuer, a literal client secret and the role table
    config = write_toml(tmp_path / "c.toml", (
        'oidc_issuer = "https://sso.example.com/realms/ops"\noidc_client_id = "fleetsched"\n'
        'oidc_client_secret = "hunter2-client-secret"\n'
        '[oidc_roles]\n"cn=ops,ou=groups" = "operator"\n"acme-approvers" = '
        '"customer-approver:acme"\n'))
    settings = load_settings(environ={}, config_path=config)
    # Then the table keeps its order (the first match wins) and a value may hold , and =
    assert settings.oidc_roles == (("cn=ops,ou=groups", "operator"),
                                   ("acme-approvers", "customer-approver:acme"))
    # And the environment's form splits at the last '='
    env = load_settings(environ={"FLEETSCHED_OIDC_ROLES": "noc=viewer, a=b=admin"},
                        config_path=config)
    assert env.oidc_roles == (("noc", "viewer"), ("a=b", "admin"))
    # And config show masks the secret in every format
    for fmt in ("table", "json"):
        code, out, err = run_cli(["--config", str(config), "config", "show", "-o", fmt])
        assert code == 0, err
        assert "hunter2" not in out + err and "customer-approver:acme" in out


@pytest.mark.parametrize(("environ", "message"), [
    ({"FLEETSCHED_OIDC_ISSUER": "https://sso.example.com"},
     "oidc_issuer and oidc_client_id go together"),
    ({"FLEETSCHED_OIDC_ISSUER": "http://sso.example.com", "FLEETSCHED_OIDC_CLIENT_ID": "x"},
     "must be an https:// URL"),
    ({"FLEETSCHED_OIDC_ROLES": "no-equals-sign"}, "expected key=value pairs"),
    ({"FLEETSCHED_OIDC_SESSION_MINUTES": "soon"}, "oidc_session_minutes"),
])
def test_bad_single_sign_on_settings_are_refused_in_one_line(
        environ: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(environ={**environ, "XDG_CONFIG_HOME": str(tmp_path)}, config_path=None)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_servers_read_cache_time_comes_from_the_environment_and_is_checked() -> None:
    environ = {"FLEETSCHED_SERVER_READ_CACHE_MS": "0"}
    assert load_settings(environ=environ, config_path=None).server_read_cache_ms == 0
    with pytest.raises(ConfigError, match=r"server_read_cache_ms = '-1' is not valid"):
        load_settings(environ={"FLEETSCHED_SERVER_READ_CACHE_MS": "-1"}, config_path=None)
    with pytest.raises(ConfigError, match=r"server_read_cache_ms = 90000 is out of range"):
        load_settings(environ={"FLEETSCHED_SERVER_READ_CACHE_MS": "90000"}, config_path=None)
