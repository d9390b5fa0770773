"""A task's plan as ``submit`` shows it: the one rendering of a plan's facts, made where the
plan is (the CLI in direct mode, the server for ``POST /tasks`` with ``dry_run``), so that the
CLI prints the same plan in direct and in remote mode (``scheduler.remote.submit``).

:func:`view_of` turns a ``Plan`` into a :class:`PlanView`: the head (action, target, hosts,
policy, windows, frozen hosts, waves, and for an action that can say it, such as ``shell``,
the command line its first host runs), one row per job, the blast-radius sentence, whether the
task is fleet-wide (``submit`` asks before it queues one), and the random draw of wave order a
dry run shows (``drawn``: its seed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.submission.submit import Plan

__all__ = ["PlanView", "view_of"]


@dataclass(frozen=True)
class PlanView:
    """What ``submit`` says of a plan (see the module docstring)."""

    head: dict[str, Any]
    params: dict[str, Any]
    rows: list[dict[str, Any]]
    waves: bool  # the rows have a wave column
    blast_radius: str
    fleet_wide: bool
    drawn: int | None = None
    waves_text: str | None = None  # the waves' spec in words, when the task has waves

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanView:
        return cls(**data)


def _when(job: Any) -> str:
    if job.wclose:
        frozen = f", frozen until {job.frozen_until.isoformat()}" if job.frozen_until else ""
        return (f"{job.due.isoformat()} (window {job.window}, closes {job.wclose.isoformat()}"
                f"{frozen})")
    if job.frozen_until:
        return f"{job.due.isoformat()} (frozen until {job.frozen_until.isoformat()}: {job.window})"
    return "now" if job.due is None else job.due.isoformat()


def blast_radius(plan: Plan) -> str:
    return (f"{plan.action} on {len(plan.hosts)} hosts in {len(plan.groups)} groups"
            f" (target {plan.target})")


def runs_on_first_host(plan: Plan) -> str | None:
    """The command line the plan's first host runs, for an action with a ``preview``
    (``shell``: the script with that host's values quoted in); None for the others."""
    import tasks
    from tasks.argv import PlaceholderError
    from tasks.host import Host

    action = tasks.get_action(plan.action)
    preview = getattr(action, "preview", None)
    if preview is None or not plan.hosts:
        return None
    conn = plan.hosts[0]
    host = Host(conn.name, conn.address, conn.port, conn.user, dict(conn.vars))
    try:
        line = preview(action.validate(dict(plan.params)), host)
    except PlaceholderError as exc:
        return f"on {conn.name}: cannot be filled in: {exc}"
    return f"on {conn.name}: {line}"


def view_of(plan: Plan, *, draw: bool = True) -> PlanView:
    """The plan's view; ``draw``: make the random draw of a random wave order without a seed
    (a dry run shows one; ``--wave-seed`` makes exactly it)."""
    policy = plan.policy.describe(plan.request)
    head = {"action": plan.action, "target": str(plan.target), "hosts": len(plan.hosts),
            "groups": len(plan.groups), "operator": plan.operator,
            "priority": plan.request.priority, "executor": plan.executor,
            "start": plan.start.isoformat() if plan.start else "now",
            "in_window": plan.in_window, "windows": plan.windows_text(), **policy}
    runs = runs_on_first_host(plan)
    if runs is not None:
        head["runs"] = runs
    rows = [{"job": j.seq, "host": j.host, "when": _when(j), "window": j.window,
             "frozen_until": j.frozen_until.isoformat() if j.frozen_until else None}
            for j in plan.jobs]
    frozen = [j for j in plan.jobs if j.frozen_until]
    if frozen:
        head["frozen"] = (f"{len(frozen)} of {len(plan.jobs)} hosts are frozen: their jobs wait "
                          f"until {max(j.frozen_until for j in frozen).isoformat()} at the "
                          "latest (--break-glass REASON runs through freezes)")
    spec = plan.request.waves
    drawn = None
    if draw and spec is not None and spec.order == "random" and spec.seed is None:
        import secrets

        drawn = secrets.randbelow(1_000_000)
    waves = plan.waves(drawn) if draw else None
    if waves:
        head["waves"] = f"{len(waves)}: {spec.describe()}"
        wave_of = {n: k for k, wave in enumerate(waves, 1) for n in wave}
        for row in rows:
            row["wave"] = wave_of[row["job"]]
        rows.sort(key=lambda r: (r["wave"], r["job"]))
        if drawn is not None:
            head["waves"] += f" (this draw: seed {drawn})"
    return PlanView(head=head, params=dict(plan.params), rows=rows, waves=bool(waves),
                    blast_radius=blast_radius(plan), fleet_wide=plan.fleet_wide, drawn=drawn,
                    waves_text=spec.describe() if spec is not None else None)
