"""``fleetsched demo``: the whole product on a simulated fleet, in about a minute.

A :class:`Demo` runs these steps, each on real components, in a private state directory
(a fresh temporary one; never the operator's own queue, database or configuration):

1. settings built from nothing but the demo directory (an empty config file, no
   ``FLEETSCHED_*`` variable), so the embedded Redis and the SQLite file are the demo's own;
2. a generated Ansible INI inventory (``--hosts`` hosts in 30 customer groups, 3 regions)
   imported into SQL, and three service windows assigned to groups (``scheduler.demo.fleet``);
3. worker processes (``python -m scheduler worker``, i.e. ``fleetsched worker``) started and waited for;
4. Alice submits a task on every host; a moment later Bob submits one on 4 hosts; both use
   the ``simulate`` executor (nothing is contacted; every result is marked simulated);
5. a live view (stderr) of both tasks' bars and of the fair-share reorders (``Keys.stats``),
   until both tasks have finished;
6. the workers are stopped (SIGTERM: they finish, record and leave), the record is read back
   (``scheduler.reports``) for a short audit summary, the embedded Redis is stopped, and the
   directory removed (kept with ``--keep``).

With ``--web`` the server runs beside the workers from step 3 (``scheduler.demo.web``): the
console's URL and an admin token are printed, and after the summary the console stays up,
on the demo's record, until Ctrl-C (or SIGTERM); then step 6's clean-up.

``--speed`` scales every duration (jobs, Bob's delay, the overload threshold); the slots are
sized so Alice's task takes about 45 s / speed whatever ``--hosts`` is.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from scheduler.config import Settings, load_settings
from scheduler.demo.fleet import add_windows, write_inventory
from scheduler.errors import FleetschedError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler.demo.web import WebConsole

__all__ = ["HOSTS_RANGE", "SPEED_RANGE", "DemoOptions", "DemoResult", "Demo"]

JOB_MS = 1_200  # a simulated job's duration at speed 1 (± a third)
ALICE_S = 45.0  # Alice's task should take about this long at speed 1
BOB_DELAY_S = 3.0  # Bob submits this long after Alice
OVERLOAD_MS = 2_000  # the head of the queue late by this much triggers a fair-share reorder
FAILURE_RATE = 0.004  # simulated failures (each job has one retry)
WORKERS = 2  # worker processes (one per core of a small machine)
# The sizes the demo offers: each shows fair share (Bob's 4 jobs done long before Alice's).
# Under 100 hosts Alice's task no longer overloads the two workers' slots for long (10 hosts
# took 2 s at speed 3); over speed 20 the workers' start and the live view's refresh weigh as
# much as the jobs (at speed 50 Alice took 1.8 s, Bob 1.1 s).
HOSTS_RANGE = (100, 100_000)
SPEED_RANGE = (0.1, 20.0)
DEMO_COLUMNS = ("task", "progress", "done", "failed", "running", "rate/s", "eta")  # fits 80 columns
@dataclass(frozen=True)
class DemoOptions:
    hosts: int = 3000
    speed: float = 1.0
    keep: bool = False
    workers: int = WORKERS
    seed: str = "demo"
    web: bool = False  # also serve the web console until Ctrl-C (scheduler.demo.web)

    def __post_init__(self) -> None:
        if not HOSTS_RANGE[0] <= self.hosts <= HOSTS_RANGE[1]:
            raise ValidationError(f"--hosts {self.hosts} must be from {HOSTS_RANGE[0]} to {HOSTS_RANGE[1]}")
        if not SPEED_RANGE[0] <= self.speed <= SPEED_RANGE[1]:
            raise ValidationError(f"--speed {self.speed:g} must be from {SPEED_RANGE[0]:g} to {SPEED_RANGE[1]:g}")

    @property
    def job_ms(self) -> int:
        return max(1, int(JOB_MS / self.speed))

    @property
    def slots(self) -> int:
        """Slots in all, so that Alice's jobs take about ALICE_S / speed."""
        return max(self.workers, math.ceil(self.hosts * self.job_ms / 1000 / (ALICE_S / self.speed)))


@dataclass
class TaskRun:
    who: str
    task_id: int = 0
    hosts: int = 0
    submitted: float = 0.0  # monotonic
    finished: float | None = None
    progress: Any = None

    def summary(self, t0: float) -> dict[str, Any]:
        p = self.progress
        return {"who": self.who, "task_id": self.task_id, "jobs": self.hosts,
                "submitted_s": round(self.submitted - t0, 2),
                "completed_s": None if self.finished is None else round(self.finished - t0, 2),
                "duration_s": None if self.finished is None else round(self.finished - self.submitted, 2),
                "succeeded": p.succeeded if p else 0, "failed": p.failed if p else 0}


@dataclass
class DemoResult:
    options: DemoOptions
    runs: list[TaskRun]
    t0: float
    reorders: int = 0
    state_dir: str | None = None
    elapsed_s: float = 0.0
    audit: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        alice, bob = self.runs
        return {"simulation": True, "hosts": self.options.hosts, "speed": self.options.speed,
                "slots": self.options.slots, "job_ms": self.options.job_ms,
                "tasks": {r.who.lower(): r.summary(self.t0) for r in self.runs},
                "bob_finished_first": bob.finished is not None and (
                    alice.finished is None or bob.finished < alice.finished),
                "reorders": self.reorders, "elapsed_s": round(self.elapsed_s, 2),
                "audit": self.audit, "state_dir": self.state_dir}


def _env(config: Path, state_dir: Path, overload_ms: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_CONFIG=str(config), FLEETSCHED_STATE_DIR=str(state_dir),
               FLEETSCHED_OVERLOAD_THRESHOLD_MS=str(overload_ms), FLEETSCHED_OPERATOR="demo")
    return env


class Demo:
    """One demo run; see the module docstring for the steps. ``run()`` returns the result."""

    def __init__(self, options: DemoOptions, console: Console) -> None:
        self.o = options
        self.console = console
        self.dir = Path(tempfile.mkdtemp(prefix="fleetsched-demo-"))
        self.config = self.dir / "config.toml"
        self.config.write_text("# fleetsched demo: defaults only, everything under this directory\n")
        self.overload_ms = max(200, int(OVERLOAD_MS / options.speed))
        self.settings: Settings = load_settings(
            {"state_dir": self.dir, "operator": "demo",
             "overload_threshold_ms": self.overload_ms},
            environ={}, config_path=self.config)
        self.workers: list[subprocess.Popen[bytes]] = []
        self._moved = ""  # the latest reorder that moved jobs, for the live header
        self._interrupted = False
        self.client: Any = None
        self.engine: Any = None
        self.web: WebConsole | None = None

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        self._interrupted = True

    def check_interrupt(self) -> None:
        """Raise KeyboardInterrupt here if Ctrl-C or SIGTERM arrived."""
        if self._interrupted:
            raise KeyboardInterrupt

    def say(self, message: str, style: str = "") -> None:
        self.console.print(Text(message, style=style))

    # ---------------------------------------------------------------------------- steps

    def setup(self) -> None:
        from scheduler.inventory import import_inventory
        from scheduler.record.session import open_database
        from scheduler.redisdb.connect import connect

        self.say("SIMULATION: a generated fleet and the simulate executor; no host is contacted.",
                 "bold yellow")
        self.say(f"state: {self.dir} (private to this demo: embedded Redis + SQLite)", "dim")
        self.client = connect(self.settings)
        self.engine = open_database(self.settings)
        inventory = self.dir / "inventory.ini"
        write_inventory(inventory, self.o.hosts)
        result = import_inventory(self.engine, inventory, operator="demo")
        counts = result.plan.counts()
        self.say(f"imported {counts['added']} hosts in {counts['groups_added']} groups "
                 f"(customers and regions) from a generated Ansible inventory")
        for line in add_windows(self.engine):
            self.say(f"  service window {line}", "dim")

    def start_workers(self) -> None:
        from scheduler.queue.keys import Keys

        per = max(1, math.ceil(self.o.slots / self.o.workers))
        env = _env(self.config, self.dir, self.overload_ms)
        for n in range(self.o.workers):
            log = open(self.dir / f"worker-{n + 1}.log", "wb")  # noqa: SIM115 - closed by the child's exit
            argv = [sys.executable, "-P", "-m", "scheduler", "worker", "--slots", str(per),
                    "--processes", str(min(per, 2)), "--id", f"demo-worker-{n + 1}",
                    "--grace", "5s", "--idle", "120s"]
            self.workers.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT, env=env,
                                                 start_new_session=True,
                                                 preexec_fn=_die_with_demo))
            log.close()
        self.say(f"started {self.o.workers} worker processes, {per} slots each "
                 f"(simulated jobs take {self.o.job_ms / 1000:g}s)")
        deadline = time.monotonic() + 60
        keys = Keys(self.settings.queue_prefix)
        while len(self.client.hkeys(keys.workers)) < self.o.workers:
            self.check_interrupt()
            self._check_workers()
            if time.monotonic() > deadline:
                raise FleetschedError("the demo workers did not start within 60s",
                                      hint=f"see {self.dir}/worker-1.log (run with --keep)")
            time.sleep(0.1)

    def _check_workers(self) -> None:
        for n, proc in enumerate(self.workers):
            if proc.poll() is not None:
                tail = (self.dir / f"worker-{n + 1}.log").read_text(errors="replace").strip()
                last = tail.splitlines()[-1] if tail else f"exit code {proc.returncode}"
                raise FleetschedError(f"demo worker {n + 1} exited: {last}",
                                      hint="run fleetsched demo --keep to keep its log")

    def open_console(self) -> None:
        """With ``--web``: the server on the demo's deployment, its URL and a token printed."""
        from scheduler.demo import web

        self.web = web.start(self.settings, _env(self.config, self.dir, self.overload_ms),
                             self.dir, self.check_interrupt, _die_with_demo)
        self.console.print(Text(f"web console: {self.web.url}", style="bold"), soft_wrap=True)
        self.console.print(Text(f"sign in with this token: {self.web.token}", style="bold"),
                           soft_wrap=True)

    def hold(self) -> None:
        """With ``--web``, after the summary: keep the console up until Ctrl-C or SIGTERM."""
        assert self.web is not None
        self.say(f"The demo has ended; its web console stays up at {self.web.url} "
                 "until Ctrl-C.", "bold")
        while not self._interrupted:
            if not self.web.alive():
                raise FleetschedError("the demo's web console stopped",
                                      hint=f"see {self.web.log} (run with --keep)")
            time.sleep(0.2)

    def submit(self, run: TaskRun, target: str, cmd: str) -> None:
        from scheduler.queue.shards import shards_of
        from scheduler.submission.submit import TaskRequest, submit

        jitter = self.o.job_ms // 3
        request = TaskRequest(
            action="command", target=target, params={"cmd": cmd}, name=f"{run.who}: {cmd}",
            executor="simulate", retries=1, backoff_s=0.5 / self.o.speed,
            executor_options={"duration_ms": self.o.job_ms, "jitter_ms": jitter,
                              "failure_rate": FAILURE_RATE, "seed": self.o.seed})
        done = submit(self.engine, lambda: self.client, request, operator=run.who.lower(),
                      keys=shards_of(self.settings))
        run.task_id, run.hosts, run.submitted = done.task_id, done.jobs, time.monotonic()
        self.say(f"{run.who} submitted task {run.task_id}: `{cmd}` on {done.jobs} hosts "
                 f"({target})", "bold")


    # ---------------------------------------------------------------------------- live view

    def _header(self, stats: dict[str, str], started: float) -> Text:
        """One line under 80 columns: the clock and the fair-share reorders so far."""
        line = f"SIMULATION  t+{time.monotonic() - started:.1f}s  fair-share reorders: " \
               f"{stats.get('reorder_count', '0')}"
        if stats.get("reorder_jobs", "0") != "0":  # a reorder that found nothing to move is no news
            self._moved = f" (latest moved {stats['reorder_jobs']} jobs, " \
                          f"{stats.get('reorder_tasks', '?')} tasks)"
        return Text(line + self._moved, style="dim")

    def follow(self, alice: TaskRun, bob: TaskRun) -> None:
        """Draw both tasks until they have finished; submit Bob's on time; note milestones."""
        from rich.console import Group

        from scheduler.queue.route import task_reader
        from scheduler.queue.shards import shards_of
        from scheduler.views import RateMeter, read_tasks, task_table
        from scheduler.views.live import live_view

        shards = shards_of(self.settings)
        keys = task_reader(shards)
        meter = RateMeter(window_s=5.0)
        bob_at = alice.submitted + BOB_DELAY_S / self.o.speed
        deadline = alice.submitted + 20 * ALICE_S / self.o.speed + 60
        with live_view(self.console) as live:
            while True:
                self.check_interrupt()
                now = time.monotonic()
                if not bob.task_id and now >= bob_at:
                    self.submit(bob, self._bob_target(), "systemctl restart nginx")
                runs = [r for r in (alice, bob) if r.task_id]
                for run, prog in zip(runs, read_tasks(self.client, keys, [str(r.task_id) for r in runs])):
                    run.progress = prog
                    if prog is None:
                        continue
                    meter.add(prog.task_id, prog.done, now)
                    if prog.finished and run.finished is None:
                        # a task may end while its own submit returns (fast jobs, slow record)
                        run.finished = max(now, run.submitted)
                        self._milestone(run, alice)
                labels = {str(r.task_id): r.who for r in runs}
                shown = [r.progress for r in runs if r.progress is not None]
                # the reorders of the shard of Alice's task, the one overloaded
                stats = self.client.hgetall(shards.of_task(str(alice.task_id)).stats)
                live.update(Group(self._header(stats, alice.submitted),
                                  task_table(shown, meter, labels=labels, width=24,
                                             columns=DEMO_COLUMNS)), refresh=True)
                if bob.task_id and all(r.finished is not None for r in (alice, bob)):
                    return
                self._check_workers()
                if now > deadline:
                    raise FleetschedError("the demo tasks did not finish in time",
                                          hint="is the machine very busy? try --hosts 500")
                time.sleep(0.2)

    def _bob_target(self) -> str:
        from scheduler.inventory import list_hosts
        from scheduler.record.session import transaction

        with transaction(self.engine, commit=False) as session:
            names = [h["name"] for h in list_hosts(session, group="customer-acme")]
            if len(names) < 4:
                names = [h["name"] for h in list_hosts(session)]
        return ",".join(names[-4:])

    def _milestone(self, run: TaskRun, alice: TaskRun) -> None:
        took = run.finished - run.submitted if run.finished else 0.0
        if run is alice:
            self.say(f"Alice's task finished after {took:.1f}s.", "bold green")
            return
        p = alice.progress
        if alice.finished is not None or p is None or p.finished:
            self.say(f"Bob's task finished after {took:.1f}s, after Alice's: no fair-share "
                     "reorder put his jobs first.", "bold red")
            return
        self.say(f"Bob's task finished after {took:.1f}s, while Alice's is "
                 f"{100 * p.done / max(p.total, 1):.0f}% done: under overload the workers take "
                 "turns between tasks instead of serving Alice's queue first.", "bold green")

    # ---------------------------------------------------------------------------- the end

    def drain_and_stop(self) -> None:
        """Wait until the recorder has every event in SQL, then stop the workers (SIGTERM)."""
        from scheduler.queue.shards import shards_of
        from scheduler.record.recorder import backlog

        shards = shards_of(self.settings)
        deadline = time.monotonic() + 30
        while (any(backlog(self.client, keys.events)[0] > 0 for keys in shards.all)
               and time.monotonic() < deadline):
            self.check_interrupt()
            time.sleep(0.1)
        self.stop_workers()

    def stop_workers(self, fast: bool = False) -> None:
        """SIGTERM (finish running jobs, record, leave), or with ``fast`` SIGINT (give the
        leases back at once); SIGKILL to whoever is still there after 20 s."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if fast else signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.workers:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def audit(self, runs: list[TaskRun]) -> dict[str, Any]:
        """Read the record back: per-task outcome from SQL, and the fair-share reorders."""
        import sqlalchemy as sa

        from scheduler.record.models import Event
        from scheduler.reports import ReportFilter, build_report

        report = build_report(self.engine, ReportFilter())
        with self.engine.connect() as conn:
            reorders = conn.execute(sa.select(sa.func.count()).select_from(Event)
                                    .where(Event.kind == "reorder")).scalar_one()
            events = conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()
        who = {r.task_id: r.who for r in runs}
        tasks = [{"who": who.get(t["task"], "?"), "task": t["task"], "jobs": t["jobs"],
                  "succeeded": t["succeeded"], "failed": t["failed"] + t["lost"],
                  "first": t["first"].isoformat() if t["first"] else None,
                  "last": t["last"].isoformat() if t["last"] else None} for t in report.tasks]
        return {"events": int(events), "reorder_events": int(reorders), "tasks": tasks,
                "failures": [{"job": f["job"], "host": f["host"], "error": f["error"]}
                             for f in report.failures[:10]]}

    def close(self, interrupted: bool = False) -> None:
        """Stop everything the demo started and remove its directory (unless ``keep``); a
        second Ctrl-C meanwhile only makes the workers stop faster."""
        from scheduler.redisdb import embedded
        try:
            try:
                self.stop_workers(fast=interrupted)
            except KeyboardInterrupt:
                self.stop_workers(fast=True)
        finally:
            if self.client is not None:
                self.client.close()
            if self.engine is not None:
                self.engine.dispose()
            if self.web is not None:
                self.web.stop()
            try:
                embedded.stop(self.settings)
            finally:
                if not self.o.keep:
                    shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, report: Callable[[DemoResult], None] | None = None) -> DemoResult:
        """The demo's steps; ``report(result)`` is called before the clean-up (with
        ``--web``, before the console is held up until Ctrl-C)."""
        t0 = time.monotonic()
        alice, bob = TaskRun("Alice"), TaskRun("Bob")
        interrupted = False
        # Ctrl-C and SIGTERM only set a flag; the steps check it at safe points (a
        # KeyboardInterrupt raised inside a rich print could leave the console buffering).
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for step in (self.setup, self.start_workers,
                         *((self.open_console,) if self.o.web else ()),
                         lambda: self.submit(alice, "all", "apt-get install --only-upgrade -y openssl"),
                         lambda: self.follow(alice, bob), self.drain_and_stop):
                self.check_interrupt()
                step()
            audit = self.audit([alice, bob])
            result = DemoResult(self.o, [alice, bob], alice.submitted, state_dir=str(self.dir)
                                if self.o.keep else None, elapsed_s=time.monotonic() - t0,
                                audit=audit)
            result.reorders = audit["reorder_events"]
            if report is not None:
                report(result)
            if self.web is not None:
                self.hold()  # Ctrl-C here is the demo's normal end
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.close(interrupted)
        return result


def _die_with_demo() -> None:
    """In a worker process before exec: SIGTERM it if the demo process dies (Linux), so a
    killed demo leaves no worker behind."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def to_json(result: DemoResult) -> str:
    return json.dumps(result.as_dict(), indent=2)
