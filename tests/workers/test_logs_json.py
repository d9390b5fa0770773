"""A worker's log in JSON lines: every line of a real node's stderr is one JSON object, the lines
written while a job runs (in a child) carry its task, job, host, attempt and the worker id, and a
secret parameter's value appears nowhere (``tasks.secrets`` masks it before formatting)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import redis

from scheduler.logs import JsonFormatter, TextFormatter, configure, job_context
from tests.worker_support import (
    WorkerProcess,
    dump,
    final_outcomes,
    submit,
    wait_until,
    worker_args,
)

SECRET = "json-log-s3cret-value"


def test_a_node_in_json_format_writes_only_json_lines_with_the_job_bound(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    # Given a job whose command gets a secret from the worker's environment and echoes it
    jobs = submit(redis_client, "41", ["web-1"], executor="local",
                  params={"cmd": ["echo", "@env:FS_JSON_TEST_SECRET"]})
    # When a node logging JSON at debug level runs it
    w = WorkerProcess(redis_url, tmp_path, worker_args("node-j", slots=2, processes=1),
                      env={"FLEETSCHED_LOG_FORMAT": "json", "FLEETSCHED_LOG_LEVEL": "debug",
                           "FS_JSON_TEST_SECRET": SECRET}).start()
    try:
        wait_until(lambda: final_outcomes(redis_client, jobs)[jobs[0]] == "acked", 20,
                   "the job acked", lambda: w.tail() + dump(redis_client), [w])
    finally:
        w.stop()
    text = w.log.read_text()
    # Then every line is a JSON object with the common fields
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines and all({"ts", "level", "logger", "msg", "pid"} <= set(x) for x in lines)
    assert all(x.get("worker") == "node-j" for x in lines), text
    # the start line of the command is one of them
    assert any(x["msg"].startswith("worker node-j: 2 slots") for x in lines), text
    # and the lines of the job carry its fields, with the secret masked
    job_lines = [x for x in lines if x.get("job") == jobs[0]]
    assert job_lines, text
    assert all((x["task"], x["host"], x["attempt"]) == ("41", "web-1", 1) for x in job_lines)
    assert any("command: echo ***" in x["msg"] for x in job_lines), text
    assert SECRET not in text


def test_library_records_and_tracebacks_take_the_same_json_shape(capsys) -> None:
    configure("debug", "json", [], static={"worker": "w-1"})
    try:
        with job_context(task="7", job="7.3", host="db-2", attempt=2):
            logging.getLogger("paramiko.transport").info("connected to %s", "db-2")
            try:
                raise ValueError("boom")
            except ValueError:
                logging.getLogger("sqlalchemy.engine").exception("a query failed")
        logging.getLogger("paramiko.transport").info("outside any job")
    finally:
        logging.getLogger().handlers[:] = []
    a, b, c = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert (a["logger"], a["msg"], a["job"], a["host"], a["worker"]) == (
        "paramiko.transport", "connected to db-2", "7.3", "db-2", "w-1")
    assert b["level"] == "error" and "ValueError: boom" in b["exc"] and b["attempt"] == 2
    assert "job" not in c and c["worker"] == "w-1"


def test_text_lines_put_the_job_fields_before_the_message() -> None:
    record = logging.LogRecord("x", logging.WARNING, "", 0, "slow %s", ("host",), None)
    record.fs = {"worker": "w", "job": "1.2", "host": "h"}
    assert TextFormatter().format(record).endswith(" WARNING x [job=1.2 host=h]: slow host")
    assert json.loads(JsonFormatter().format(record))["msg"] == "slow host"
