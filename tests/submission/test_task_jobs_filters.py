"""The record queries behind a task's page (``scheduler.submission.taskinfo``) on a real SQLite
record filled by real submissions: ``wave_counts`` (each wave's jobs by state, by a GROUP BY
over host-number ranges in inventory order, by the (number, state) pairs in random order),
``task_jobs``'s exit code and text filters, and ``list_tasks``'s group filter."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.submission.fanout import recorded_waves
from scheduler.submission.taskinfo import list_tasks, task_jobs, wave_counts
from tests.submit_support import Cli, cli_with_inventory

INVENTORY = "[web]\n" + "".join(f"web-{n:02}\n" for n in range(1, 9)) + "[db]\ndb-01\n"


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, INVENTORY)


@pytest.mark.parametrize("order", ["inventory", "random"])
def test_each_wave_is_counted_by_the_state_of_its_own_jobs(cli: Cli, order: str) -> None:
    task_id = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h",
                         "--waves", "2,50%,100%", "--wave-order", order,
                         *(["--wave-seed", "7"] if order == "random" else []))
    engine = sa.create_engine(cli.database_url)
    with Session(engine) as session:
        waves = recorded_waves(session, task_id)
        assert waves is not None and len(waves) == 3 and sum(len(w) for w in waves) == 8
        # Given one job of the second wave failed and one of the third succeeded
        session.execute(sa.text("UPDATE jobs SET state = 'failed' WHERE id = :id"),
                        {"id": waves[1][0]})
        session.execute(sa.text("UPDATE jobs SET state = 'succeeded' WHERE id = :id"),
                        {"id": waves[2][-1]})
        session.commit()
        # Then each wave counts its own
        counts = wave_counts(session, task_id)
    assert counts is not None
    assert [sum(c.values()) for c in counts] == [len(w) for w in waves]
    assert counts[1].get("failed") == 1 and counts[2].get("succeeded") == 1
    assert "failed" not in counts[0] and "failed" not in counts[2]
    if order == "random":  # the draw with this seed spreads each wave's hosts
        assert any(max(int(j.split(".")[1]) for j in w) - min(int(j.split(".")[1]) for j in w)
                   + 1 != len(w) for w in waves)


def test_a_task_without_waves_has_no_wave_counts(cli: Cli) -> None:
    task_id = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    with Session(sa.create_engine(cli.database_url)) as session:
        assert wave_counts(session, task_id) is None


def test_jobs_are_found_by_exit_code_and_by_text_taken_literally(cli: Cli) -> None:
    task_id = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    engine = sa.create_engine(cli.database_url)
    with engine.begin() as conn:
        for seq, code, error, tail in ((0, 3, "exit 3: Disk 100% full", None),
                                       (1, 3, None, "wrote a_b.txt"),
                                       (2, 0, None, "wrote axb.txt")):
            conn.execute(sa.text("UPDATE jobs SET exit_code = :code, error = :error, "
                                 "output_tail = :tail WHERE task_id = :task AND seq = :seq"),
                         {"code": code, "error": error, "tail": tail, "task": task_id,
                          "seq": seq})
    with Session(engine) as session:
        def ids(**filters: object) -> list[int]:
            return [r["seq"] for r in task_jobs(session, task_id, **filters)]  # type: ignore[arg-type]

        assert ids(exit_code=3) == [0, 1] and ids(exit_code=0) == [2]
        assert ids(text="DISK 100%") == [0]
        assert ids(text="100%") == [0] and ids(text="0%") == [0]
        assert ids(text="a_b") == [1]  # "_" is no wildcard: axb is not found
        assert ids(text="wrote", exit_code=0) == [2]
        assert ids(text="nowhere") == []


def test_the_group_filter_takes_a_target_term_naming_the_group(cli: Cli) -> None:
    named = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    spaced = cli.submit("command", "-t", "db-01, group:web", "-p", "cmd=true", "--in", "1h")
    excluded = cli.submit("command", "-t", "group:db,web-01,!group:web", "-p", "cmd=true",
                          "--in", "1h")
    with Session(sa.create_engine(cli.database_url)) as session:
        def found(group: str) -> set[int]:
            return {r["id"] for r in list_tasks(session, group=group)}

        assert found("web") == {named, spaced}
        assert found("db") == {excluded}
        assert found("we") == set() and found("w%") == set()
