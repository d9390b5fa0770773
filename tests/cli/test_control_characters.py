"""Control characters a host or an operator sent are shown, never sent to the operator's
terminal (``scheduler.visible``), wherever fleetsched renders them; JSON, CSV and the SQL record
keep them intact.

The end-to-end tests run a real worker (``python -m scheduler worker``, the local executor) on
a real Redis and SQLite: the job prints colours, a title-setting OSC, a carriage return, a C1
CSI and an argument of the task (a screen-clearing sequence), then fails.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.cli import output
from scheduler.inventory import import_inventory
from scheduler.logs import TextFormatter
from scheduler.queue.keys import Keys
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.submission.submit import TaskRequest, submit
from scheduler.visible import visible
from tests.cli_support import isolated_env, run_cli
from tests.submit_support import sql_rows

CLEAR = "\x1b[2J\x1b[H"  # a task parameter: clear the screen, cursor home
# What the job prints: colours, an OSC setting the window title, a carriage return rewriting the
# line, a C1 CSI (U+009B, as UTF-8), then its argument.
SCRIPT = ("import sys; sys.stdout.buffer.write(b'\\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 "
          "10%\\r100% \\xc2\\x9b2J ' + sys.argv[1].encode() + b'\\n'); sys.exit(1)")
PRINTED = f"\x1b[31mred\x1b[0m \x1b]0;title\x07 10%\r100% \x9b2J {CLEAR}"
SHOWN = "^[[31mred^[[0m ^[]0;title^G 10%^M100% M-^[2J ^[[2J^[[H"
RAW = ("\x1b", "\x07", "\r", "\x9b")  # none of these may reach a rendering


# ------------------------------------------------------------------------------ the one rule


def test_c0_controls_are_shown_as_caret_letters_like_cat_v() -> None:
    assert visible("\x1b[31mred") == "^[[31mred"
    assert visible("\x00\x01\x07\x08\x0b\x0c\r\x1f") == "^@^A^G^H^K^L^M^_"


def test_del_is_shown_as_caret_question_mark() -> None:
    assert visible("a\x7fb") == "a^?b"


def test_c1_controls_are_shown_with_a_meta_prefix_like_cat_v() -> None:
    assert visible("\x80 \x85 \x9b \x9d \x9f") == "M-^@ M-^E M-^[ M-^] M-^_"


def test_bidi_overrides_and_isolates_are_shown_by_their_code_point() -> None:
    assert visible("abc\u202edcba\u202c") == "abc<U+202E>dcba<U+202C>"
    assert visible("\u2066x\u2069") == "<U+2066>x<U+2069>"


def test_direction_marks_line_separators_and_the_bom_are_shown_by_their_code_point() -> None:
    assert visible("a\u200fb\u2028c\u2029d\u061ce\ufefff\u200e") == (
        "a<U+200F>b<U+2028>c<U+2029>d<U+061C>e<U+FEFF>f<U+200E>")


def test_a_multi_line_error_in_a_watch_frame_stays_on_its_line() -> None:
    from scheduler.views.render import failure_lines

    lines = failure_lines({"kind": "fail", "job": "7.0", "host": "web-01", "exit_code": 3,
                           "error": "boom\n  running web-09 on node-1, 3.0s",
                           "last_lines": ["out\nmore"]})
    assert [ln.plain for ln in lines] == [
        "fail 7.0 on web-01 exit 3: boom^J  running web-09 on node-1, 3.0s",
        "       web-01: out^Jmore"]


def test_newline_tab_and_printable_text_stay_as_they_are() -> None:
    text = "line one\n\tindented é€😀 ^[ already printable\n"
    assert visible(text) == text


def test_no_control_character_below_a0_survives() -> None:
    every = "".join(chr(c) for c in range(0xA0))
    shown = visible(every)
    assert all(ch.isprintable() or ch in "\n\t" for ch in shown)
    assert shown.count("\n") == 1 and shown.count("\t") == 1


# --------------------------------------------------------------- the output module's renderings


def test_a_table_shows_control_characters_on_a_terminal_and_in_plain_columns(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"host": "web-01", "error": PRINTED}]
    output.emit_rows(rows, ["host", "error"])  # not a terminal: plain columns
    plain = capsys.readouterr().out
    assert SHOWN in plain and not any(c in plain for c in RAW)
    monkeypatch.setattr(output.stdout, "_force_terminal", True)
    output.emit_rows(rows, ["host", "error"])  # a rich table
    table = capsys.readouterr().out
    assert "^[[31mred" in table and not any(c in table for c in ("\x1b[31m", "\x1b]", *RAW[1:]))


def test_json_and_csv_keep_control_characters_intact(
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"host": "web-01", "error": PRINTED}]
    output.emit_rows(rows, ["host", "error"], output.OutputFormat.json)
    assert json.loads(capsys.readouterr().out) == rows
    output.emit_rows(rows, ["host", "error"], output.OutputFormat.csv)
    assert PRINTED in capsys.readouterr().out


def test_messages_errors_and_key_value_lines_show_control_characters(
        capsys: pytest.CaptureFixture[str]) -> None:
    output.info(f"note {PRINTED}")
    output.error(f"no host {CLEAR}", hint=f"try {CLEAR}")
    output.emit_object({"params": PRINTED})
    out, err = capsys.readouterr()
    assert SHOWN in out and "no host ^[[2J^[[H" in err and "hint: try ^[[2J^[[H" in err
    assert not any(c in out + err for c in RAW)


def test_emoji_codes_in_user_data_are_printed_as_written(
        capsys: pytest.CaptureFixture[str]) -> None:
    output.emit_object({"params": "msg=:warning: disk"})
    output.info("web-01: :fire:")
    out, err = capsys.readouterr()
    assert "msg=:warning: disk" in out and "web-01: :fire:" in err


def test_a_text_log_line_shows_control_characters() -> None:
    record = logging.LogRecord("workers.runner", logging.WARNING, __file__, 1,
                               "job failed: %s", (PRINTED,), None)
    line = TextFormatter().format(record)
    assert line.endswith(f"job failed: {SHOWN}") and not any(c in line for c in RAW)


# -------------------------------------------------------------------- end to end, on real parts


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> dict:
    """One host in a fresh SQLite record; env for the CLI and for the worker."""
    db = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(db)
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[web]\nweb-01\n")
    engine = make_engine(db)
    import_inventory(engine, inventory, operator="tester")
    engine.dispose()
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    return {"db": db, "redis_url": redis_url, "env": env, "tmp": tmp_path}


@pytest.fixture
def worker(fleet: dict) -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update({k: v for k, v in fleet["env"].items() if v is not None})
    with open(fleet["tmp"] / "worker.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "worker", "--slots", "2",
                                 "--processes", "1", "--grace", "2s"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    yield proc
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def task(fleet: dict, worker: subprocess.Popen) -> int:
    """The job that prints control characters has failed, and the record holds its output."""
    engine = make_engine(fleet["db"])
    request = TaskRequest(action="command", target="web-01", executor="local", retries=0,
                          name=f"deploy {CLEAR}",
                          params={"cmd": [sys.executable, "-c", SCRIPT, CLEAR]})
    try:
        done = submit(engine, lambda: redis.Redis.from_url(fleet["redis_url"],
                                                           decode_responses=True),
                      request, operator="alice", keys=Keys())
    finally:
        engine.dispose()
    deadline = time.monotonic() + 60
    while not sql_rows(fleet["db"], "SELECT 1 FROM jobs WHERE task_id = :t AND state = 'failed' "
                                    "AND output_tail IS NOT NULL", t=done.task_id):
        assert time.monotonic() < deadline and worker.poll() is None, (
            fleet["tmp"] / "worker.log").read_text()
        time.sleep(0.1)
    return done.task_id


def test_tasks_output_and_jobs_show_show_what_the_host_printed_without_its_escapes(
        fleet: dict, task: int) -> None:
    code, out, err = run_cli(["tasks", "output", str(task)], fleet["env"])
    assert code == 0, err
    assert f"web-01: {SHOWN}" in out.splitlines() and not any(c in out for c in RAW)
    code, out, err = run_cli(["jobs", "show", f"{task}.0"], fleet["env"])
    assert code == 0, err
    assert f"    | {SHOWN}" in out.splitlines() and not any(c in out for c in RAW)
    assert "^[[2J^[[H" in out  # the command line, with the task's argument


def test_tasks_show_and_tasks_watch_on_a_terminal_show_parameters_and_failures_visibly(
        fleet: dict, task: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for console in (output.stdout, output.stderr):
        monkeypatch.setattr(console, "_force_terminal", True)
    code, out, err = run_cli(["tasks", "show", str(task)], fleet["env"])
    assert code == 0, err
    # rich writes escapes of its own on a terminal (bold headers): none of the task's are there
    assert "deploy ^[[2J^[[H" in out and "^[[2J^[[H" in out.split("params", 1)[1]
    assert CLEAR not in out
    code, _out, err = run_cli(["tasks", "watch", str(task), "--timeout", "30s"], fleet["env"])
    assert code == 3, err
    assert f"web-01: {SHOWN}" in err
    assert not any(c in err for c in ("\x1b[31m", "\x1b]0", CLEAR, "\x07", "\r", "\x9b"))


def test_the_report_table_and_html_show_the_task_name_and_parameters_visibly(
        fleet: dict, task: int) -> None:
    code, out, err = run_cli(["report", "--task", str(task)], fleet["env"])
    assert code == 0, err
    assert "deploy ^[[2J^[[H" in out and "\x1b" not in out
    page = fleet["tmp"] / "report.html"
    code, _out, err = run_cli(["report", "--task", str(task), "--html", str(page)], fleet["env"])
    assert code == 0, err
    assert "deploy ^[[2J^[[H" in page.read_text() and "\x1b" not in page.read_text()


def test_json_csv_and_the_sql_record_keep_the_bytes_the_host_printed(
        fleet: dict, task: int) -> None:
    code, out, err = run_cli(["tasks", "output", str(task), "--output", "json"], fleet["env"])
    assert code == 0, err
    assert json.loads(out)[0]["lines"] == [PRINTED]
    code, out, err = run_cli(["jobs", "show", f"{task}.0", "--output", "json"], fleet["env"])
    assert code == 0, err
    assert json.loads(out)["attempts"][0]["commands"][0]["stdout_head"] == PRINTED + "\n"
    code, out, err = run_cli(["tasks", "show", str(task), "--output", "json"], fleet["env"])
    assert code == 0, err
    assert json.loads(out)["params"]["cmd"][-1] == CLEAR
    code, out, err = run_cli(["report", "--task", str(task), "--output", "csv"], fleet["env"])
    assert code == 0, err
    [row] = csv.DictReader(io.StringIO(out))  # the job's error ends with the line it printed
    assert row["error"].endswith(f"\x9b2J {CLEAR}")
    [(tail, name, params)] = sql_rows(
        fleet["db"], "SELECT j.output_tail, t.name, t.params FROM jobs j "
                     "JOIN tasks t ON t.id = j.task_id WHERE j.task_id = :t", t=task)
    assert json.loads(tail)[0]["stdout_head"] == PRINTED + "\n"
    assert name == f"deploy {CLEAR}" and json.loads(params)["cmd"][-1] == CLEAR
