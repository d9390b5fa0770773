"""The simulate executor: durations, failure rates and labels, for the demo and benchmarks."""

from __future__ import annotations

import math
import time

import pytest

from scheduler.errors import ValidationError
from tasks.executors import Host, build_executor
from tasks.executors import simulate as simulate_module

HOST = Host(name="sim-01")


def outcomes(n: int, **options) -> list:
    executor = build_executor("simulate", options)
    with executor.session(HOST) as session:
        return [session.run(["fw-upgrade", str(i)], timeout=60) for i in range(n)]


def test_every_result_is_labelled_simulated() -> None:
    (result,) = outcomes(1)
    assert result.simulated and result.ok
    assert result.stdout_head == "[simulated] sim-01: fw-upgrade 0\n"
    assert result.command == "fw-upgrade 0"


def test_a_failure_rate_fails_that_share_of_commands() -> None:
    # Given 4000 commands at a 25 % failure rate
    n, rate = 4000, 0.25
    failed = sum(not r.ok for r in outcomes(n, failure_rate=rate, exit_code=3))
    # Then the failures are within 5 standard deviations of the expected count
    sigma = math.sqrt(n * rate * (1 - rate))
    assert abs(failed - n * rate) < 5 * sigma
    failures = [r for r in outcomes(200, failure_rate=1.0, exit_code=3)]
    assert {r.exit_code for r in failures} == {3}
    assert all(r.stderr_head == "[simulated] failure\n" for r in failures)


def test_the_same_seed_gives_the_same_outcomes_and_durations() -> None:
    a = outcomes(50, failure_rate=0.5, seed="7", jitter_ms=3, duration_ms=3)
    b = outcomes(50, failure_rate=0.5, seed="7", jitter_ms=3, duration_ms=3)
    c = outcomes(50, failure_rate=0.5, seed="8", jitter_ms=3, duration_ms=3)
    key = [(r.exit_code, r.duration_s) for r in a]
    assert key == [(r.exit_code, r.duration_s) for r in b]
    assert key != [(r.exit_code, r.duration_s) for r in c]


def test_durations_follow_duration_and_jitter() -> None:
    started = time.monotonic()
    results = outcomes(10, duration_ms=30, jitter_ms=10)
    elapsed = time.monotonic() - started
    assert all(0.020 <= r.duration_s <= 0.040 for r in results)
    assert elapsed >= sum(r.duration_s for r in results) * 0.95


def test_zero_duration_never_calls_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"sleep({seconds}) called for a zero duration")

    monkeypatch.setattr(simulate_module.time, "sleep", no_sleep)
    assert all(r.ok and r.duration_s == 0 for r in outcomes(1000))


def test_a_duration_beyond_the_timeout_times_out() -> None:
    executor = build_executor("simulate", {"duration_ms": 5000})
    with executor.session(HOST) as session:
        result = session.run(["slow"], timeout=0.05)
    assert result.timed_out and result.exit_code is None and result.simulated
    assert result.duration_s == 0.05


def test_file_operations_touch_nothing_and_are_recorded_as_simulated(tmp_path) -> None:
    executor = build_executor("simulate", {})
    target = tmp_path / "f"
    with executor.session(HOST) as session:
        session.put(b"abc", str(target) + ".tmp", 0o640)
        session.rename(str(target) + ".tmp", str(target))
        session.remove(str(target))
    assert not list(tmp_path.iterdir())
    assert session.operations == [
        f"[simulated] put {target}.tmp (3 bytes, mode 0640)",
        f"[simulated] rename {target}.tmp {target}",
        f"[simulated] remove {target}",
    ]


@pytest.mark.parametrize("options, message", [
    ({"failure_rate": "1.5"}, "failure_rate=1.5 is not between 0 and 1"),
    ({"duration_ms": "soon"}, "duration_ms='soon' is not a non-negative number"),
    ({"duration_ms": -5}, "duration_ms=-5 is not a non-negative number"),
    ({"speed": 1}, "simulate executor has no option 'speed'"),
])
def test_bad_options_are_refused_in_one_line(options: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_executor("simulate", options)
