"""Notifications from the command line: ``submit --notify`` and ``schedules add --notify`` store
their targets (a bad one is refused with one line, exit code 2, nothing written);
``notify test`` reaches a real HTTP server (exit 1 with the reason when it is down);
``notify list`` shows the outbox without secrets. Real redis-server and SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from scheduler.notify import Detector, Policy, parse_targets
from scheduler.queue.keys import Keys
from scheduler.record.migrate import upgrade
from scheduler.record.models import Schedule
from scheduler.record.recorder import Recorder
from scheduler.schedules.store import request_of
from tests.notify_support import Webhook
from tests.recorder_events import job_lifecycle, xadd_all
from tests.submit_support import Cli, inventory, redis_snapshot, sql_rows, sql_snapshot

FLEET = """
[web]
web-01 ansible_host=10.0.0.1
web-02 ansible_host=10.0.0.2
"""


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    url = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(url)
    cli = Cli(tmp_path, redis_url, url)
    inventory(cli, tmp_path, FLEET)
    return cli


@pytest.mark.parametrize("bad", ["ftp://files.example/x", "hooks.example/x", "mailto:nobody",
                                 "https://", ""])
def test_a_bad_notify_target_is_refused_in_one_line_and_nothing_is_written(
        cli: Cli, redis_client: redis.Redis, bad: str) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    for args in (["submit", "command", "-t", "group:web", "-p", "cmd=true", "--yes"],
                 ["schedules", "add", "nightly", "command", "--cron", "0 3 * * *",
                  "-t", "group:web", "-p", "cmd=true"]):
        code, out, err = cli(*args, "--notify", "mailto:ops@example.org", "--notify", bad)
        assert code == 2, err
        assert out == ""
        assert err.splitlines()[0].startswith("error: ") and "notify target" in err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


@pytest.mark.parametrize("bad", ["htps://hooks.slack.com/services/T0/B0/s3cr3t",
                                 "hooks.slack.com/services/T0/B0/s3cr3t?token=s3cr3t",
                                 "http://hooks.example/\x7fs3cr3t",
                                 "http://hooks.example/s3cr3t\x00"])
def test_a_bad_notify_target_is_refused_without_echoing_its_path(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path, bad: str) -> None:
    from tests.cli_support import isolated_env, run_cli

    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    # When a target with a mistyped scheme, no scheme or a control character is given to
    # submit, schedules add and notify test
    for args in (["submit", "command", "-t", "group:web", "-p", "cmd=true", "--yes"],
                 ["schedules", "add", "nightly", "command", "--cron", "0 3 * * *",
                  "-t", "group:web", "-p", "cmd=true"], ["notify", "test"]):
        code, out, err = cli(*args, *(["--notify"] if args[0] != "notify" else []), bad)
        # Then it is refused with one line that does not show the path (the secret)
        assert code == 2, err
        assert err.startswith("error: ") and "notify target" in err
        assert "s3cr3t" not in out + err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before
    # and as the notify setting: config show and notify test keep the path out as well
    if "\x00" in bad:
        return  # (no NUL in an environment variable)
    env = isolated_env(tmp_path, FLEETSCHED_NOTIFY=bad)
    code, out, err = run_cli(["config", "show"], env)
    assert code == 0, err
    assert "s3cr3t" not in out + err and "hooks." in out
    code, out, err = run_cli(["notify", "test"], env)
    assert code == 2 and err.startswith("error: setting notify: notify target ")
    assert "s3cr3t" not in out + err


def test_a_task_and_a_schedule_keep_their_targets_and_the_submit_event_shows_no_secret(
        cli: Cli) -> None:
    hook = "https://hooks.example.org/services/T0/B0/s3cr3t"
    # When a task and a schedule are given targets
    task_id = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--notify", hook,
                         "--notify", "mailto:ops@example.org")
    cli.ok("schedules", "add", "nightly", "command", "--cron", "0 3 * * *", "-t", "group:web",
           "-p", "cmd=true", "--notify", "https://hooks.example.org/sched/s3cr3t")
    # Then the task row holds them as typed
    (row,) = sql_rows(cli.database_url, "SELECT notify FROM tasks WHERE id = :id", id=task_id)
    assert json.loads(row[0]) == [hook, "mailto:ops@example.org"]
    # and the submit event shows the webhook without its secret path
    (ev,) = sql_rows(cli.database_url, "SELECT data FROM events WHERE kind = 'submit'")
    assert json.loads(ev[0])["notify"] == ["https://hooks.example.org/...",
                                           "mailto:ops@example.org"]
    # and each occurrence of the schedule asks for the schedule's targets
    engine = sa.create_engine(cli.database_url)
    with engine.connect() as conn:
        sched = conn.execute(sa.select(Schedule.__table__).where(Schedule.name == "nightly")).one()
    engine.dispose()
    assert request_of(sched).notify == ("https://hooks.example.org/sched/s3cr3t",)
    # and schedules show lists it without its secret path
    shown = cli.ok("schedules", "show", "nightly", "-o", "json")
    assert json.loads(shown)["options"]["notify"] == ["https://hooks.example.org/..."]
    assert "s3cr3t" not in shown
    # and its table says the options set in words, never as a Python dict
    table = cli.ok("schedules", "show", "nightly")
    assert "count_failures=attempts priority=normal notify=https://hooks.example.org/..." \
        in table, table
    assert "params            cmd=true" in table and "{" not in table and "None" not in table


def test_notify_test_sends_a_test_notice_and_exits_1_with_the_reason_when_it_cannot(
        cli: Cli, webhook: Webhook) -> None:
    # When a test notice goes to a live receiver
    code, out, err = cli("notify", "test", webhook.url("/hook?token=t0ps3cret"))
    # Then it arrives, and the exit code is 0
    assert code == 0, err
    assert [r["json"]["kind"] for r in webhook.requests] == ["test"]
    assert webhook.requests[0]["json"]["text"] == "[fleetsched] test notice from tester"
    # When the receiver is down
    webhook.stop()
    code, out, err = cli("notify", "test", webhook.url("/hook?token=t0ps3cret"))
    # Then the exit code is 1 and the reason is printed, without the token
    assert code == 1
    assert "Connection refused" in err and "t0ps3cret" not in err + out
    # and with no target given and none configured, it says so (exit code 2)
    code, _, err = cli("notify", "test")
    assert code == 2 and "no notify target" in err


def test_notify_list_shows_the_outbox_without_secrets(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a failed task with a webhook target holding a token, recorded by a recorder
    task_id = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--notify",
                         "http://127.0.0.1:9/hook?token=t0ps3cret")
    jobs = [(f"{task_id}.0", "web-01"), (f"{task_id}.1", "web-02")]
    xadd_all(redis_client, list(job_lifecycle(str(task_id), jobs,
                                              fail=frozenset({jobs[0][0]})))[2:])
    engine = sa.create_engine(cli.database_url)
    rec = Recorder(redis_client, engine, Keys(), "r1", on_batch=Detector(Policy()))
    while rec.run_once(block_ms=None):
        pass
    engine.dispose()
    # When the outbox is listed
    out = cli.ok("notify", "list", "-o", "json")
    # Then the pending notice is shown, its target without the token
    (row,) = json.loads(out)
    assert (row["kind"], row["state"], row["task"], row["target"]) == (
        "failed", "pending", str(task_id), "http://127.0.0.1:9/...")
    assert "t0ps3cret" not in out
    assert parse_targets(["http://127.0.0.1:9/hook?token=t0ps3cret"])[0].shown == \
        "http://127.0.0.1:9/..."


def test_a_task_file_takes_notify_and_refuses_a_bad_target_with_its_line(
        cli: Cli, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("action: command\ntarget: group:web\nparams: {cmd: 'true'}\n"
                    "notify: mailto:ops@example.org\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("action: command\ntarget: group:web\nparams: {cmd: 'true'}\n"
                   "notify:\n  - mailto:ops@example.org\n  - gopher://old.example\n")
    # When a task file gives one target, Then the task keeps it
    task_id = int(cli.ok("submit", "-f", str(good), "--yes").strip())
    (row,) = sql_rows(cli.database_url, "SELECT notify FROM tasks WHERE id = :id", id=task_id)
    assert json.loads(row[0]) == ["mailto:ops@example.org"]
    # When one of its targets is bad, Then the error names the file and line, and exit code 2
    code, _, err = cli("submit", "-f", str(bad), "--yes")
    assert code == 2
    assert err.startswith(f"error: {bad}:5: notify target 'gopher://old.example'")


def test_config_show_and_a_bad_global_target_keep_webhook_secrets_and_the_smtp_password_out(
        tmp_path: Path) -> None:
    from tests.cli_support import isolated_env, run_cli

    # Given global targets with secrets in a webhook's path and query, and an SMTP password
    env = isolated_env(tmp_path, FLEETSCHED_NOTIFY="https://hooks.example/T0/s3cr3t?token=t0k3n,"
                                                   "mailto:ops@example.org",
                       FLEETSCHED_SMTP_PASSWORD="hunter22")
    # When the settings are shown
    code, out, err = run_cli(["config", "show"], env)
    # Then the targets are there without their secrets, and the password is masked
    assert code == 0, err
    assert "https://hooks.example/..., mailto:ops@example.org" in out
    for secret in ("s3cr3t", "t0k3n", "hunter22"):
        assert secret not in out + err
    # and a bad global target stops `notify test` with one line, exit code 2
    code, out, err = run_cli(["notify", "test"], {**env, "FLEETSCHED_NOTIFY": "hooks.example"})
    assert code == 2 and err.startswith("error: setting notify: notify target 'hooks.example'")


def test_notify_test_mails_through_the_smtp_setting_and_never_falls_back_from_starttls(
        tmp_path: Path, smtp: Any) -> None:
    from tests.cli_support import isolated_env, run_cli

    env = isolated_env(tmp_path, FLEETSCHED_SMTP_HOST="127.0.0.1",
                       FLEETSCHED_SMTP_PORT=str(smtp.port),
                       FLEETSCHED_SMTP_FROM="fleetsched@example.org")
    # When a test mail goes through a plain SMTP server, Then it arrives
    code, _, err = run_cli(["--as", "tester", "notify", "test", "mailto:ops@example.org"], env)
    assert code == 0, err
    assert [(m[0], m[1], m[2]["Subject"]) for m in smtp.mails] == [
        ("fleetsched@example.org", ["ops@example.org"], "[fleetsched] test notice from tester")]
    # When STARTTLS is required but the server does not offer it
    code, _, err = run_cli(["notify", "test", "mailto:ops@example.org"],
                           {**env, "FLEETSCHED_SMTP_TLS": "starttls"})
    # Then nothing is sent in the clear: exit code 1, and the reason
    assert code == 1 and "STARTTLS" in err
    assert len(smtp.mails) == 1
