"""Every ``fleetsched ...`` example an operator is shown runs, and exits as it should.

The examples come from every command's ``--help`` epilog, README.md and docs/ (see
``tests/doc_examples.py``). They run in-process (``tests.cli_support.run_cli``) against a
fixture installation: a private Redis, a SQLite record, an inventory holding every host and
group the examples name, and a worker node whose executor is ``simulate``.

What the test changes in an example, all of it listed here:

- ``SIMULATED``: a ``submit``/``schedules add`` from options gets ``--executor simulate``, so
  jobs "run" on the fixture fleet without SSH (task files and template files ask for it
  themselves);
- ``SUBSTITUTE``: host names of servers the test does not have become the fixture's;
- ``ENDED``: the task ids of the verbs that wait for a task's end (``tasks wait``, ``tasks
  watch``, ``tasks output``) are those of finished tasks, while 12, 42 and 43 stay pending an
  hour ahead so that every control verb (pause, resume, cancel ...) applies to them;
- ``ONCE``: a live view runs one frame (``top --once``).

Examples that cannot run in a test are in ``SKIPPED`` with the reason; examples whose point is
a refusal or an unreachable server are in ``EXPECTED`` with their exit code.

The examples run twice, each time on a new installation: in direct mode, and in remote mode
(``--server`` and an admin token, through a real ``fleetsched server`` on the installation),
where each exits as in direct mode. What the remote pass changes, all of it listed here:

- ``DIRECT_ONLY``: a command that stays the deployment's is run directly, as its operator
  would, after checking that the server refuses it ("needs direct mode");
- ``--as NAME`` is refused through a server by design: the example runs with a token of NAME
  instead (``owners``); those tokens are made first, so ``tokens revoke N`` names N plus their
  number (the N-th token an example made, as in direct mode);
- the examples of ``READING`` commands are also run directly, and must print the same.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import ExitStack
from itertools import zip_longest
from pathlib import Path

import pytest
import yaml

from scheduler.config import Settings
from tests.cli.remote_support import READING, built_once, normalised
from tests.cli_support import isolated_env, run_cli
from tests.doc_examples import (
    Example,
    Run,
    all_examples,
    command_path,
    doc_examples,
    doc_files,
    help_examples,
    segments,
)
from tests.notify_support import Smtp, Webhook
from tests.server.conftest import server_process
from tests.worker_support import WorkerProcess

SIMULATED = ["--executor", "simulate", "--executor-option", "duration_ms=0"]
SUBSTITUTE = {"redis://redis.internal:6379/0": "{redis_url}"}
ENDED = {"12": "13", "42": "44", "43": "45"}
ONCE = {("top",): ["--once"]}
WAITING = {("tasks", "wait"), ("tasks", "watch"), ("tasks", "output")}

SKIPPED: dict[tuple[str, ...], str] = {
    ("demo",): "simulates 3,000 hosts for about a minute; tests/cli/test_demo.py runs it",
    ("worker",): "serves until stopped; this test runs a worker node, tests/test_worker_*.py "
                 "test them",
    ("recorder",): "records until stopped; `recorder --drain` runs here",
    ("exporter",): "serves until stopped; tests/monitoring/test_metrics_exporter.py runs it",
    ("server",): "serves until stopped; tests/server/test_api.py runs it",
}
# An option with which a command of SKIPPED ends by itself: that example runs.
ENDS_WITH = {("recorder",): "--drain"}
EXPECTED: dict[str, tuple[int, str]] = {
    "fleetsched --database-url postgresql+psycopg://fleetsched@db/fleetsched db upgrade":
        (1, "there is no host `db` here: the database cannot be reached"),
    "FLEETSCHED_SMTP_HOST=mail.example.org fleetsched notify test mailto:ops@example.org":
        (1, "no mail.example.org here: the delivery fails, and the exit code says so"),
    "fleetsched notify test https://hooks.slack.com/services/T0/B0/XXXX":
        (1, "no internet here: the delivery fails, and the exit code says so"),
    **{f"fleetsched hosts check{args}": (3, ("the fixture's hosts are names without an sshd: "
                                             "each is reported unreachable, exit 3 as documented "
                                             "(tests/inventory/test_hosts_check.py checks real "
                                             "ones)"))
       for args in ("", "     # like ansible -m ping: reachable, host key, login, remote user",
                    " 'group:web,!web-07' --concurrency 50 --timeout 5s",
                    " db-01 --become-user postgres", " group:edge --output json")},
    "$ fleetsched hosts check group:web": (3, "as above"),
    **{f"fleetsched --as alice tasks continue {t}{rest}": (
        2, ("the fixture's task is not a rollout waiting at a gate: refused with one line, "
            "exit 2 (tests/rollouts/test_waves_ssh.py passes a real gate)"))
       for t, rest in (("42", ""), ("12", "    # pass the gate (recorded with alice's name)"))},
}

# The commands that stay an administrator's at the deployment: refused through a server, they
# are run directly in the remote pass (a prefix of the command path).
DIRECT_ONLY: dict[tuple[str, ...], str] = {
    ("db",): "the schema and the record's upkeep (upgrade, downgrade, prune, history)",
    ("windows", "sync"): "rebuilds the Redis copies of the windows from the record",
    ("reconcile",): "repairs the queue from the record",
    ("redis",): "the embedded redis-server of a deployment",
    ("notify",): "sends from the deployment's targets and SMTP settings; reads its outbox",
    ("worker",): "a node, and the nodes' heartbeats in Redis",
    ("recorder",): "drains the event stream into the record",
    ("doctor",): "checks the deployment's own settings, Redis and database",
}
OPERATOR = "alice"  # the installation's operator, and the owner of the remote pass's token

# The fleet every example names: groups of hosts (an Ansible inventory, INI and JSON).
FLEET = {
    "web": [f"web-{n:02}" for n in range(1, 9)],
    "db": ["db-02"],  # db-01 is the one `hosts add` adds
    "fw": ["fw-01", "fw-02"],
    "dns": ["dns-01"],
    "customer-acme": ["acme-01", "acme-02", "web-07"],
    "old-dc": ["old-01"],
    "prod": ["web01.example.com"],
    "edge": ["edge-01"],
}
CHILDREN = {"prod": ["web", "db"]}
# Host variables the `vars.` target examples pick by: web-01 and web-02 are the canaries.
HOST_VARS = {h: {"tier": "canary" if n <= 2 else "prod", "rack": f"r{(n - 1) % 3 + 1}"}
             for n, h in enumerate(FLEET["web"], 1)}
# The order an operator would run them in; an example runs with the first entry its command
# starts with, in the order of its source within one entry.
ORDER = [
    "version", "config", "actions", "db upgrade", "db current", "db history", "tokens",
    "hosts import",
    "hosts add", "hosts list", "hosts show", "hosts export", "hosts check", "groups list", "groups limit", "tenants", "windows add", "windows assign",
    "windows approve", "windows list", "windows show", "windows next", "windows sync",
    "templates add", "templates list", "templates show", "schedules add", "schedules list", "schedules show", "schedules next", "schedules pause",
    "schedules resume", "submit", "templates run", "tasks list", "tasks show", "jobs show", "tasks pause",
    "tasks resume", "tasks continue", "tasks reprioritize", "tasks retry-failed", "tasks cancel", "tasks wait",
    "tasks watch", "tasks output", "hosts history", "report", "recorder", "reconcile", "status",
    "doctor", "notify", "top", "worker", "exporter", "server", "redis", "windows freeze", "windows deny",
    "windows revoke", "windows edit", "windows unassign", "windows remove", "templates remove",
    "schedules remove",
    "hosts remove", "groups remove", "db prune", "db downgrade", "demo",
]


def direct_only(path: tuple[str, ...]) -> bool:
    return any(path[:len(prefix)] == prefix for prefix in DIRECT_ONLY)


def owners() -> list[str]:
    """Whose tokens the remote pass uses: the operator's, then every ``--as NAME`` of an
    example."""
    named = {r.args[i + 1] for e in all_examples() for r in segments(e.text)
             for i, word in enumerate(r.args[:-1]) if word == "--as"}
    return [OPERATOR, *sorted(named - {OPERATOR})]


def without_as(args: list[str]) -> tuple[list[str], str]:
    """(the arguments without ``--as NAME``, NAME or the installation's operator)."""
    if "--as" not in args:
        return args, OPERATOR
    at = args.index("--as")
    return args[:at] + args[at + 2:], args[at + 1]


def skip_reason(example: Example) -> str | None:
    for run in segments(example.text):
        if any(word.startswith("[") for word in run.args):
            return "a synopsis ([optional] parts), not a command line"
        path = command_path(run.args)
        reason = SKIPPED.get(path)
        if reason and ENDS_WITH.get(path) not in run.args:
            return reason
    return None


def distinct(examples: list[Example]) -> list[Example]:
    """One example per command line: the same line in --help and a guide runs once (a second
    `windows add sun-night` would be refused: the window exists)."""
    seen: set[str] = set()
    out = []
    for example in examples:
        key = repr([(r.args, r.env, r.capture) for r in segments(example.text)])
        if key not in seen:
            seen.add(key)
            out.append(example)
    return out


def rank(example: Example) -> int:
    runs = segments(example.text)
    words = " ".join(command_path(runs[-1].args)) if runs else ""
    return next((i for i, prefix in enumerate(ORDER) if words.startswith(prefix)), len(ORDER))


def inventory_ini() -> str:
    lines = []
    for group, hosts in FLEET.items():
        lines.append(f"[{group}]")
        lines += [f"{h} ansible_host=127.0.0.1 ansible_port=1"
                  + "".join(f" {k}={v}" for k, v in HOST_VARS.get(h, {}).items()) for h in hosts]
        lines.append("")
    for group, children in CHILDREN.items():
        lines += [f"[{group}:children]", *children, ""]
    return "\n".join(lines)


def inventory_json() -> str:
    hosts = sorted({h for members in FLEET.values() for h in members})
    doc: dict = {"_meta": {"hostvars": {h: {"ansible_host": "127.0.0.1", "ansible_port": 1,
                                            **HOST_VARS.get(h, {})} for h in hosts}},
                 "all": {"children": ["ungrouped", *FLEET]}}
    for group, members in FLEET.items():
        doc[group] = {"hosts": members, **({"children": CHILDREN[group]}
                                           if group in CHILDREN else {})}
    return json.dumps(doc)


def task_files() -> dict[str, str]:
    """The YAML task files the docs show (a block opening with ``# NAME.yaml``), asking for
    the simulated executor; ``task.yaml`` (the help's example) is the same as reload.yaml."""
    files: dict[str, str] = {}
    for path in doc_files():
        for block in path.read_text().split("```yaml\n")[1:]:
            body = block.split("```", 1)[0]
            first = body.splitlines()[0] if body else ""
            if first.startswith("# ") and first.endswith(".yaml"):
                task = yaml.safe_load(body)
                task.update(executor="simulate", executor_options={"duration_ms": 0})
                files[first[2:]] = yaml.safe_dump(task)
    files["task.yaml"] = files["reload.yaml"]
    return files


class Installation:
    """The fixture installation and how an example runs against it."""

    def __init__(self, tmp: Path, redis_url: str, notify_url: str, smtp_port: int) -> None:
        self.tmp, self.redis_url = tmp, redis_url
        self.server: str | None = None  # the remote pass's: examples go through it
        self.tokens: dict[str, str] = {}  # owner: admin token, for the remote pass
        # the global notification target: a real local webhook receiver (`notify test`)
        self.env = isolated_env(tmp, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_OPERATOR=OPERATOR,
                                FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp / 'record.db'}",
                                FLEETSCHED_NOTIFY=notify_url, FLEETSCHED_SMTP_HOST="127.0.0.1",
                                FLEETSCHED_SMTP_PORT=str(smtp_port))
        # redis start/stop/status are about the embedded server: no redis_url for them.
        self.embedded_env = isolated_env(tmp / "embedded", FLEETSCHED_OPERATOR=OPERATOR,
                                         FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp / 'record.db'}")

    def cli(self, *args: str) -> str:
        code, out, err = run_cli(list(args), self.env)
        assert code == 0, f"fixture step {' '.join(args)} exited {code}: {err}"
        return out

    def serve(self, server: str) -> None:
        """From now on, examples go through ``server``, with admin tokens made here."""
        for owner in owners():
            self.tokens[owner] = self.cli("tokens", "create", f"docs-{owner}", "--role",
                                          "admin", "--owner", owner).strip()
        self.server = server

    def run(self, run: Run, variables: dict[str, str],
            direct: bool = False) -> tuple[int, str, str]:
        """``run`` through the server in the remote pass (unless ``direct`` or a command of
        ``DIRECT_ONLY``), else at the deployment."""
        args, env = self.prepared(run, variables)
        if self.server is None or direct or direct_only(command_path(args)):
            return run_cli(args, env)
        return self.through_server(args, run.env)

    def through_server(self, args: list[str], extra_env: dict[str, str]) -> tuple[int, str, str]:
        assert self.server is not None
        args, owner = without_as(args)
        if command_path(args) == ("tokens", "revoke"):
            args = [str(int(a) + len(self.tokens)) if a.isdigit() else a for a in args]
        env = isolated_env(self.tmp, FLEETSCHED_SERVER=self.server,
                           FLEETSCHED_TOKEN=self.tokens[owner])
        return run_cli(args, {**env, **extra_env})

    def refusal(self, run: Run, variables: dict[str, str]) -> str | None:
        """Why a command of ``DIRECT_ONLY`` is wrongly listed there: the server did not refuse
        it in one line (None: it did)."""
        args, _env = self.prepared(run, variables)
        code, out, err = self.through_server(args, run.env)
        if (code, out) == (2, "") and "needs direct mode" in err:
            return None
        return f"through the server: exit {code}, {err.strip()[:200]!r}, not refused"

    def prepared(self, run: Run, variables: dict[str, str]) -> tuple[list[str], dict]:
        """The example's arguments with the test's changes, and its environment."""
        args = [variables.get(a[1:], a) if a.startswith("$") else a for a in run.args]
        args = [SUBSTITUTE[a].format(redis_url=self.redis_url) if a in SUBSTITUTE else a
                for a in args]
        path = command_path(args)
        if path in WAITING:
            args = [ENDED.get(a, a) for a in args]
        if path in (("submit",), ("schedules", "add")) and not {"-f", "--template"} & set(args):
            args += SIMULATED
        args += ONCE.get(path, [])
        env = dict(self.embedded_env if path[:1] == ("redis",) else self.env)
        env.update(run.env)
        return args, env


@pytest.fixture(params=["direct", "remote"])
def installation(request: pytest.FixtureRequest, tmp_path: Path, redis_url: str,
                 monkeypatch: pytest.MonkeyPatch, webhook: Webhook, smtp: Smtp):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inventory.ini").write_text(inventory_ini())
    (tmp_path / "hosts.ini").write_text(inventory_ini())
    for name in ("inv.json", "production.json"):
        (tmp_path / name).write_text(inventory_json())
    for name, text in task_files().items():
        (tmp_path / name).write_text(text)
    inst = Installation(tmp_path, redis_url, webhook.url(), smtp.port)
    with ExitStack() as stack:
        stack.enter_context(built_once())
        # the embedded server the redis examples started (stopped last)
        stack.callback(run_cli, ["redis", "stop"], inst.embedded_env)
        inst.cli("db", "upgrade")
        inst.cli("hosts", "import", "inventory.ini")
        # Tasks 1-45: 12, 42 and 43 pending an hour ahead (every control verb applies), 13, 44
        # and 45 run to their end by the worker, the others one-host fillers.
        for n in range(1, 46):
            later = ["--in", "1h"] if str(n) in ENDED else []
            target = "group:web" if str(n) in ENDED or str(n) in ENDED.values() else "web-01"
            out = inst.cli("submit", "command", "-t", target, "-p", "cmd=uptime", "--yes",
                           *SIMULATED, *later)
            assert out.strip() == str(n)
        worker = WorkerProcess(redis_url, tmp_path / "worker",
                               ["--id", "docs", "--slots", "8", "--processes", "1"],
                               env={"FLEETSCHED_DATABASE_URL": inst.env["FLEETSCHED_DATABASE_URL"]})
        worker.start()
        stack.callback(worker.stop)
        base = None
        if request.param == "remote":
            # the server starts up while the worker node does and runs the tasks
            settings = {k: v for k, v in inst.env.items() if k.startswith("FLEETSCHED_") and v}
            base, _process = stack.enter_context(server_process(
                tmp_path, redis_url, inst.env["FLEETSCHED_DATABASE_URL"], env=settings))
        for n in ENDED.values():
            code, _, err = run_cli(["tasks", "wait", n, "--timeout", "60s"], inst.env)
            assert code == 0, f"task {n} did not end: {err}\n{worker.tail()}"
        inst.cli("recorder", "--drain")
        if base is not None:
            inst.serve(base.removesuffix("/api/v1"))
        yield inst


def test_the_examples_come_from_every_help_text_and_every_guide() -> None:
    helps, docs = help_examples(), doc_examples()
    assert len(helps) >= 90
    sources = {e.source.split(":")[0] for e in docs}
    assert {"README.md", "docs/actions.md", "docs/guides/inventory.md",
            "docs/guides/submitting-tasks.md", "docs/guides/windows-and-schedules.md"} <= sources
    # docs/cli.md is generated from the help texts: its examples are the help examples
    assert not any(e.source.startswith("docs/cli.md") for e in docs)


def test_every_skip_and_expected_code_still_names_an_example() -> None:
    examples = all_examples()
    paths = {command_path(r.args) for e in examples for r in segments(e.text)}
    assert set(SKIPPED) <= paths
    assert set(DIRECT_ONLY) <= {path[:len(prefix)] for path in paths for prefix in DIRECT_ONLY}
    assert set(EXPECTED) <= {e.text for e in examples}
    # a synopsis ("[--slots N]") is never run as if it were a command line
    assert not [e for e in examples if " [-" in e.text and not skip_reason(e)]


def shown(out: str) -> str:
    """Output as compared between the modes (the report's time, a dry run's seed)."""
    return re.sub(r"seed \d+", "seed N", normalised(out))


def difference(installation: Installation, run: Run, variables: dict[str, str],
               remote: tuple[int, str]) -> str | None:
    """How a reading command's answer through the server differs from the one given directly
    (None: they are the same). A task moving on between the two runs (a wave done) can make
    them differ once, or the server's answer a second old (``server_read_cache_ms``): then
    both run again after that second, and only a difference that stays is one."""
    for again in (False, True):
        if again:
            time.sleep(Settings.server_read_cache_ms / 1000 + 0.1)
            remote = installation.run(run, variables)[:2]
        direct = installation.run(run, variables, direct=True)
        if (remote[0], shown(remote[1])) == (direct[0], shown(direct[1])):
            return None
    return first_difference(remote, direct)


def first_difference(remote: tuple[int, str], direct: tuple[int, str, str]) -> str:
    if remote[0] != direct[0]:
        return f"exit {remote[0]} through the server, {direct[0]} directly"
    pairs = zip_longest(shown(remote[1]).splitlines(), shown(direct[1]).splitlines(),
                        fillvalue="(no line)")
    line, there, here = next(((n, a, b) for n, (a, b) in enumerate(pairs, 1) if a != b),
                             (0, remote[1], direct[1]))
    return f"line {line} through the server {there!r}\n    directly {here!r}"


def test_every_documented_example_runs_and_exits_as_it_should(
        installation: Installation, capsys: pytest.CaptureFixture) -> None:
    examples = sorted(distinct(all_examples()), key=rank)  # stable: source order within a rank
    failures, ran, skipped = [], 0, 0
    started = time.monotonic()
    for example in examples:
        if skip_reason(example):
            skipped += 1
            continue
        want, _why = EXPECTED.get(example.text, (0, ""))
        variables: dict[str, str] = {}
        for run in segments(example.text):
            path = command_path(run.args)
            refused = installation.server and direct_only(path) and installation.refusal(
                run, variables)
            if refused:
                failures.append(f"{example.source}: {example.text}\n    {refused}")
                break
            code, out, err = installation.run(run, variables)
            if run.capture:
                variables[run.capture] = out.strip()
            if code != want or "Traceback" in err:
                failures.append(f"{example.source}: {example.text}\n    exit {code}, expected "
                                f"{want}: {err.strip()[:400]}")
                break
            if installation.server and path in READING and (
                    differ := difference(installation, run, variables, (code, out))):
                failures.append(f"{example.source}: {example.text}\n    {differ}")
                break
        ran += 1
    with capsys.disabled():
        mode = "through a server" if installation.server else "directly"
        print(f"\n{ran} documented examples run {mode}, {skipped} skipped, "
              f"{time.monotonic() - started:.1f}s")
    assert not failures, f"{len(failures)} of {ran} examples failed:\n" + "\n".join(failures)
