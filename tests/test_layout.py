"""The layout's one direction of dependencies, read from the imports of every module.

docs/architecture.md ("Module map") draws the layers; this test is what keeps them true:

1. no import circle between modules (lazy imports inside functions count too);
2. no upward import: a module imports only from its own package or from a lower layer;
3. ``tasks`` never imports ``workers``; ``scheduler`` imports ``workers`` only from the commands
   that start workers (``scheduler.cli.worker_cmd``);
4. SSH is one place: only ``tasks.executors.ssh`` imports paramiko;
5. one home each: the lease default is written once (``scheduler.config.LEASE_MS``); masking
   is ``scheduler.redact``'s alone; only ``scheduler.queue`` calls a Lua script;
6. the CLI only parses, calls one verb of ``scheduler.verbs`` and renders: no module of
   ``scheduler/cli/`` is over 350 lines, no ``*_cmd`` module imports another, and none calls a
   Redis key command (``delete``, ``pipeline``, ``hmget`` ...) or imports the modules that
   spell key names (``scheduler.queue.keys``, ``scheduler.queue.route``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scheduler", "workers", "tasks")

# Lowest first. A module may import its own unit or any unit of a lower layer.
LAYERS: list[tuple[str, ...]] = [
    ("scheduler.errors", "scheduler", "scheduler.redact"),
    ("scheduler.config", "scheduler.gcpause", "scheduler.parse", "scheduler.progress"),
    ("scheduler.calendar", "scheduler.redisdb", "scheduler.logs", "scheduler.principal", "tasks"),
    ("scheduler.queue",),
    ("scheduler.record",),
    ("scheduler.inventory", "scheduler.access"),
    ("scheduler.windows",),
    ("scheduler.notify",),
    ("scheduler.submission", "scheduler.tenants"),
    ("scheduler.templates",),
    ("scheduler.schedules",),
    ("scheduler.views", "scheduler.reports", "scheduler.health"),
    ("scheduler.monitoring",),
    ("scheduler.verbs",),
    ("workers",),
    ("scheduler.demo", "scheduler.server", "scheduler.remote"),
    ("scheduler.cli",),
    ("scheduler.__main__",),
]
# The commands that start worker nodes are the only scheduler modules that import workers.
STARTS_WORKERS = {"scheduler.cli.worker_cmd"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every project module ``name`` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from pkg import mod`` imports the module pkg.mod when there is one.
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                       else node.module for a in node.names]
        else:
            continue
        out |= {t for t in targets if t.split(".")[0] in PACKAGES and t != name}
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _unit(module: str) -> tuple[int, str]:
    """(layer, unit) of a module: the longest unit prefix that names it."""
    best: tuple[int, str] | None = None
    for layer, units in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".")) and (
                    best is None or len(unit) > len(best[1])):
                best = (layer, unit)
    assert best is not None, f"{module} is in no layer of tests/test_layout.py"
    return best


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _unit(name)


def test_no_upward_import() -> None:
    upward = []
    for name, deps in GRAPH.items():
        layer, unit = _unit(name)
        for dep in deps:
            dep_layer, dep_unit = _unit(dep)
            if dep_unit != unit and dep_layer >= layer:
                upward.append(f"{name} -> {dep}")
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_import_circle() -> None:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []
    circles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(GRAPH.get(node, ())):
            if dep not in GRAPH:
                continue
            if state.get(dep) == 1:
                circles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_tasks_never_import_workers_and_scheduler_only_to_start_them() -> None:
    wrong = [f"{name} -> {dep}" for name, deps in GRAPH.items() for dep in deps
             if dep.split(".")[0] == "workers" and name.split(".")[0] != "workers"
             and name not in STARTS_WORKERS]
    assert not wrong, "\n".join(sorted(wrong))


def test_imports_name_real_modules() -> None:
    """A rename that left an import behind fails here, not in production."""
    missing = sorted(f"{name} -> {dep}" for name, deps in GRAPH.items() for dep in deps
                     if dep not in MODULES and dep.rsplit(".", 1)[0] not in MODULES)
    assert not missing, "\n".join(missing)


@functools.cache
def _parsed(name: str) -> tuple[str, list[ast.AST]]:
    """A module's source and every node of its tree, read once for the checks below."""
    source = MODULES[name].read_text()
    return source, list(ast.walk(ast.parse(source, str(MODULES[name]))))


def test_only_the_ssh_package_imports_paramiko() -> None:
    outside = []
    for name in MODULES:
        if name.startswith("tasks.executors.ssh."):
            continue
        for node in _parsed(name)[1]:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            else:
                continue
            outside += [name for t in targets if t.split(".")[0] == "paramiko"]
    assert not outside, "paramiko imported outside tasks/executors/ssh/: " + ", ".join(outside)


def test_the_lease_default_is_written_once() -> None:
    """Every other lease default names ``scheduler.config.LEASE_MS`` instead of its value."""
    from scheduler.config import LEASE_MS

    def is_lease_literal(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value == LEASE_MS

    found = []
    for name in MODULES:
        source, nodes = _parsed(name)
        for node in nodes:
            if isinstance(node, ast.arguments):
                params = [*node.posonlyargs, *node.args]
                pairs = [*zip(params[len(params) - len(node.defaults):], node.defaults),
                         *zip(node.kwonlyargs, node.kw_defaults)]
                found += [f"{name}:{d.lineno}" for a, d in pairs
                          if "lease" in a.arg.lower() and is_lease_literal(d)]
            elif isinstance(node, ast.stmt) and not hasattr(node, "body") and any(
                    is_lease_literal(n) for n in ast.walk(node)):
                text = ast.get_source_segment(source, node) or ""
                if "lease" in text.lower() and "LEASE_MS =" not in text:
                    found.append(f"{name}:{node.lineno}")
    assert not found, "a lease default written again (use scheduler.config.LEASE_MS): " + \
        ", ".join(found)


def test_masking_lives_in_scheduler_redact() -> None:
    """No other module spells the mask or filters log records to mask them."""
    from scheduler.redact import MASK

    found = []
    for name in MODULES:
        if name == "scheduler.redact":
            continue
        for node in _parsed(name)[1]:
            if isinstance(node, ast.Constant) and node.value == MASK:
                found.append(f"{name}:{node.lineno}: the mask spelled again")
            elif isinstance(node, ast.ClassDef) and "redact" in node.name.lower():
                found.append(f"{name}:{node.lineno}: class {node.name}")
    assert not found, "redaction outside scheduler/redact.py:\n" + "\n".join(found)


def test_only_the_queue_packs_lua_arguments() -> None:
    """Scripts are called, their KEYS and ARGV packed, in ``scheduler/queue/`` alone."""
    from scheduler.queue.scripts import VERBS

    script_calls = {"run_script", "scripts_for", "register_script", "eval", "evalsha",
                    "script_load", "fcall"}
    found = []
    for name in MODULES:
        if name == "scheduler.queue" or name.startswith("scheduler.queue."):
            continue
        for node in _parsed(name)[1]:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            verb = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) \
                else None
            if called in script_calls or (called == "call" and verb in VERBS):
                found.append(f"{name}:{node.lineno}: {called}({verb or ''})")
    assert not found, "Lua scripts called outside scheduler/queue/:\n" + "\n".join(found)


def test_plugins_written_against_the_old_contract_path_keep_working() -> None:
    import tasks.host
    from workers.executors import base

    assert (base.Host, base.HostSession, base.CommandResult, base.Executor) == (
        tasks.host.Host, tasks.host.HostSession, tasks.host.CommandResult, tasks.host.Executor)


# The CLI parses, calls one verb (scheduler.verbs) and renders: issue 27 section 2.
CLI_MAX_LINES = 350
# redis-py methods that name or touch keys (not get, set, keys, exists, unlink: dicts and
# paths have them).
REDIS_KEY_CALLS = {
    "delete", "pipeline", "transaction", "execute", "execute_command", "eval",
    "evalsha", "register_script", "hget", "hmget", "hset", "hgetall", "hdel", "hincrby",
    "zadd", "zrem", "zrange", "zrangebyscore", "zcard", "zscore", "lpush", "rpush", "lrange",
    "llen", "lrem", "sadd", "srem", "smembers", "xadd", "xrange", "xread", "xreadgroup",
    "expire", "pexpire", "incr", "incrby", "scan", "scan_iter", "rename", "getdel", "mget",
}
# The modules that spell key names: a command that needs one is doing a verb's work.
KEY_MODULES = {"scheduler.queue.keys", "scheduler.queue.route"}


def _cli_modules() -> dict[str, Path]:
    return {name: path for name, path in MODULES.items() if name.startswith("scheduler.cli.")}


def test_every_cli_module_is_at_most_350_lines() -> None:
    long = [f"{name}: {n} lines" for name, path in _cli_modules().items()
            if (n := len(path.read_text().splitlines())) > CLI_MAX_LINES]
    assert not long, f"CLI modules over {CLI_MAX_LINES} lines (move the work into a verb):\n" \
        + "\n".join(sorted(long))


def test_no_cli_command_module_imports_another() -> None:
    """Shared helpers live in context, output and the like, never in a ``*_cmd`` module."""
    def command(name: str) -> bool:
        return name.startswith("scheduler.cli.") and name.endswith("_cmd")

    crossed = [f"{name} -> {dep}" for name, deps in GRAPH.items() if command(name)
               for dep in deps if command(dep)]
    assert not crossed, "\n".join(sorted(crossed))


def test_the_cli_never_touches_redis_keys_itself() -> None:
    """No Redis key command called in scheduler/cli, nor a key name spelled there."""
    found = [f"{name} -> {dep}" for name in _cli_modules() for dep in GRAPH[name]
             if dep in KEY_MODULES]
    for name, path in _cli_modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in REDIS_KEY_CALLS:
                found.append(f"{name}:{node.lineno}: .{node.func.attr}(")
    assert not found, "Redis keys touched in the CLI (a verb's work):\n" + \
        "\n".join(sorted(found))
