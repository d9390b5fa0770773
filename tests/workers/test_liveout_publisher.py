"""The worker side of live output (``workers.liveout``, ``tasks.executors.live``) on a real
redis-server and real processes (the ``local`` executor): lines split as printed, masked with
the job's redactor before they leave, batched, and never in the job's way when Redis is not
there."""

from __future__ import annotations

import json
import random
import string
import time

import pytest
import redis

from scheduler.config import Settings
from scheduler.queue.keys import Keys
from scheduler.redact import Redactor
from tasks.executors import live
from tasks.executors.live import MAX_LINE, publishing
from tasks.executors.local import run_process
from tests.servers import free_port
from workers.liveout import (
    ENDED_TTL_S,
    ENTRY_BYTES,
    PENDING_BYTES,
    TTL_S,
    Publisher,
    end_streams,
    end_task_stream,
    pack,
)
from workers.protocol import Order

KEYS = Keys()
SECRET = "pUb-secret-77f1c0de"


def order(task: str, host: str = "h1") -> Order:
    return Order(f"{task}.1", 1, task, host, {}, {}, 30.0, 0, 2)


def entries(client: redis.Redis, task: str) -> list[dict[str, str]]:
    """The stream's entries, a packed entry as one entry per line (``s``, ``l``)."""
    out = []
    for _, f in client.xrange(KEYS.output(task)):
        if "d" in f:
            base = {k: v for k, v in f.items() if k != "d"}
            out += [{**base, "s": s, "l": ln} for s, ln in json.loads(f["d"])]
        else:
            out.append(f)
    return out


def test_lines_are_masked_split_and_sent_with_an_end_entry(redis_url: str,
                                                          redis_client: redis.Redis) -> None:
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv1"), Redactor([SECRET]))
    # a line with the secret, a partial line that waits (a prompt), a line longer than a piece
    script = (f'echo "token={SECRET}"; echo "err {SECRET}" >&2; printf "Continue? "; '
              f'sleep 1.3; echo yes; head -c {MAX_LINE + 10} /dev/zero | tr "\\0" x; echo')
    with publishing(job):
        result = run_process(["sh", "-c", script], 10)
    job.end()
    assert result.exit_code == 0 and result.stdout_head.startswith(f"token={SECRET}")
    got = entries(redis_client, "lv1")
    lines = [(f["s"], f["l"]) for f in got if "l" in f]
    assert ("out", "token=***") in lines and ("err", "err ***") in lines
    # the prompt went out on its own after a second, before the answer came
    assert lines.index(("out", "Continue? ")) < lines.index(("out", "yes"))
    assert ("out", "x" * MAX_LINE) in lines and ("out", "x" * 10) in lines
    assert got[-1] == {"h": "h1", "j": "lv1.1", "a": "2", "k": "end"}
    assert SECRET not in repr(got)
    assert 0 < redis_client.ttl(KEYS.output("lv1")) <= TTL_S


def test_a_secret_cut_by_a_partial_line_is_masked_on_both_sides(
        redis_url: str, redis_client: redis.Redis) -> None:
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv2"), Redactor([SECRET]))
    half = len(SECRET) // 2
    script = f'printf "key={SECRET[:half]}"; sleep 1.3; echo "{SECRET[half:]} done"'
    with publishing(job):
        run_process(["sh", "-c", script], 10)
    job.end()
    pieces = [f["l"] for f in entries(redis_client, "lv2") if "l" in f]
    # what may begin the secret waits for the rest: the secret goes out whole, masked
    assert pieces == ["key=", "*** done"]


def assert_no_fragment(client: redis.Redis, task: str, secret: str, n: int = 4) -> list[str]:
    """No piece of ``secret`` of ``n`` characters or more in the stream (each holds one of
    ``n``); the lines."""
    stream = repr(client.xrange(KEYS.output(task)))
    leaked = [secret[i:i + n] for i in range(len(secret) - n + 1) if secret[i:i + n] in stream]
    assert not leaked, (max(leaked, key=len), stream[:2000])
    return [f["l"] for f in entries(client, task) if "l" in f]


def test_a_secret_printed_slowly_in_three_pieces_never_reaches_redis_in_part(
        redis_url: str, redis_client: redis.Redis) -> None:
    # The reviewer's repro: each piece waits past PARTIAL_S and goes out on its own
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv7"), Redactor([SECRET]))
    script = 'printf "token=pUb-"; sleep 1.3; printf "secret-77f"; sleep 1.3; echo "1c0de"'
    with publishing(job):
        run_process(["sh", "-c", script], 10)
    job.end()
    assert assert_no_fragment(redis_client, "lv7", SECRET) == ["token=", "***"]


def test_a_secret_printed_one_character_at_a_time_never_reaches_redis_in_part(
        redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "PARTIAL_S", 0.1)  # each character waits past it (0.25 s)
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv8"), Redactor([SECRET]))
    script = "printf 'pass: '; " + "; ".join(
        f"printf '{c}'; sleep 0.25" for c in SECRET) + "; printf ' ok'; sleep 0.25; echo; " \
        "printf 'p'; sleep 0.25"  # ... and a start of it left at the end goes out at the end
    # (" ok" went out as a piece: the line's end adds nothing)
    with publishing(job):
        run_process(["sh", "-c", script], 30)
    job.end()
    assert assert_no_fragment(redis_client, "lv8", SECRET) == ["pass: ", "***", " ok", "p"]


def test_a_secret_across_the_piece_cut_of_a_long_line_never_reaches_redis_in_part(
        redis_url: str, redis_client: redis.Redis) -> None:
    long_secret = "".join(random.Random(7).choices(string.ascii_letters, k=2 * MAX_LINE + 900))
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv9"), Redactor([SECRET, long_secret]))
    line = "x" * (MAX_LINE - 7) + SECRET + " then " + long_secret + " end"
    with publishing(job):
        run_process(["sh", "-c", 'printf "%s\\n%s\\n" "$1" "$2"', "sh", line, "tail"], 10)
    job.end()
    got = assert_no_fragment(redis_client, "lv9", SECRET)
    assert_no_fragment(redis_client, "lv9", long_secret, 12)  # (4 letters may come by chance)
    assert "".join(got[:-1]) == "x" * (MAX_LINE - 7) + "*** then *** end" and got[-1] == "tail"


def test_a_job_runs_and_records_its_output_when_redis_is_not_there() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    publisher = Publisher(Settings(redis_url=dead))
    job = publisher.job(order("lv3"), Redactor())
    started = time.monotonic()
    with publishing(job):
        result = run_process(["sh", "-c", "for i in $(seq 1 2000); do echo line $i; done"], 30)
    job.end()
    took = time.monotonic() - started
    assert result.exit_code == 0 and result.stdout_bytes == sum(
        len(f"line {i}\n") for i in range(1, 2001))
    assert publisher.failed_sends >= 1 and publisher.sent == 0 and publisher.dropped > 0
    assert took < 5, took


def test_ten_thousand_lines_all_reach_the_stream_and_an_ended_task_keeps_it_a_minute(
        redis_url: str, redis_client: redis.Redis) -> None:
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv4"), Redactor([SECRET]))
    with publishing(job):
        result = run_process(["sh", "-c", "seq 1 10000"], 30)
    job.end()
    assert result.exit_code == 0
    got = entries(redis_client, "lv4")
    assert [f["l"] for f in got if "l" in f] == [str(i) for i in range(1, 10001)]
    # a task whose counters say it ended: its stream gets a minute (one that runs: untouched)
    redis_client.hset(KEYS.task("lv4"), mapping={"total": 1, "succeeded": 1, "running": 0,
                                                 "state": "active"})
    redis_client.hset(KEYS.task("lv5"), mapping={"total": 2, "succeeded": 1, "running": 1,
                                                 "state": "active"})
    redis_client.xadd(KEYS.output("lv5"), {"l": "x"})
    assert end_streams(redis_client, publisher.shards, ["lv4", "lv5", "lv6"]) == ["lv4"]
    assert 0 < redis_client.ttl(KEYS.output("lv4")) <= ENDED_TTL_S
    assert redis_client.ttl(KEYS.output("lv5")) == -1


def test_a_follower_a_whole_stream_behind_learns_that_lines_were_dropped(
        redis_client: redis.Redis) -> None:
    # The follower's check after a full read: is the stream's oldest entry newer than the last
    # one it read? Then the cap dropped entries it had not read (a note says so).
    from scheduler.verbs.liveoutput import _first_id_after

    key = f"{{fs}}:output:gap-{time.monotonic_ns()}"
    ids = [redis_client.xadd(key, {"k": "l", "n": str(i)}) for i in range(10)]
    read_upto = ids[2]
    assert not _first_id_after(redis_client, key, read_upto)
    redis_client.xtrim(key, maxlen=5, approximate=False)  # entries 0-4 dropped, 3 and 4 unread
    assert _first_id_after(redis_client, key, read_upto)
    assert not _first_id_after(redis_client, key, ids[6])  # nothing unread was dropped
    assert not _first_id_after(redis_client, f"{key}-none", "0-0")


def test_an_entry_holds_at_most_entry_bytes_as_xadded_whatever_the_characters(
        redis_url: str, redis_client: redis.Redis) -> None:
    # Control characters and bytes that are not UTF-8 grow in JSON (\u0001, \ufffd): the cap
    # is on what is XADDed, not on the characters
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv10"), Redactor())
    script = ('head -c 300000 /dev/urandom; echo; '
              'for i in $(seq 1 40); do head -c 4000 /dev/zero | tr "\\0" "\\1"; echo; done')
    with publishing(job):
        result = run_process(["sh", "-c", script], 30)
    job.end()
    assert result.exit_code == 0
    sizes = [len(f["d"].encode()) for _, f in redis_client.xrange(KEYS.output("lv10")) if "d" in f]
    assert sizes and max(sizes) <= ENTRY_BYTES, max(sizes)
    lines = [f["l"] for f in entries(redis_client, "lv10") if "l" in f]
    assert lines[-40:] == ["\x01" * 4000] * 40
    # one line alone more than the cap goes in an entry of its own
    (_key, fields), = pack([("k", {"h": "h", "j": "j", "a": "1", "s": "out", "l": "\x01" * 6000})])
    assert json.loads(fields["d"]) == [["out", "\x01" * 6000]]


def test_the_queue_in_the_child_holds_at_most_pending_bytes(redis_url: str) -> None:
    publisher = Publisher(Settings(redis_url=redis_url))
    job = publisher.job(order("lv11"), Redactor())
    with publisher._sending:  # its thread cannot send meanwhile: every line queues
        for _ in range(2000):  # 8 MB of 4 KiB lines, well under PENDING_MAX lines
            job.line("out", "y" * 4096, partial=False, cont=False)
        held = sum(len(f.get("l", "").encode()) for _, f, _ in publisher._pending)
        assert PENDING_BYTES * 0.98 <= held <= PENDING_BYTES + 4096, held
        assert job.dropped == publisher.dropped > 900


def test_a_cancel_that_ends_the_task_gives_its_stream_a_minute(redis_client: redis.Redis) -> None:
    from scheduler.queue.client import Queue

    queue = Queue(redis_client)
    redis_client.hset(KEYS.task("lv12"), mapping={"total": 2, "succeeded": 1, "cancelled": 1,
                                                  "running": 0, "state": "cancelled"})
    redis_client.hset(KEYS.task("lv13"), mapping={"total": 2, "succeeded": 0, "cancelled": 1,
                                                  "running": 1, "state": "cancelled"})
    for task in ("lv12", "lv13"):
        redis_client.xadd(KEYS.output(task), {"l": "x"})
        redis_client.expire(KEYS.output(task), TTL_S)
    assert end_task_stream(queue, "lv12") and not end_task_stream(queue, "lv13")
    assert 0 < redis_client.ttl(KEYS.output("lv12")) <= ENDED_TTL_S
    assert redis_client.ttl(KEYS.output("lv13")) > ENDED_TTL_S  # a job runs: its end will do
    dead = Queue(redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0"))
    assert not end_task_stream(dead, "lv12")  # Redis away: one quiet False
