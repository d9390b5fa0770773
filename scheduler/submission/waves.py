"""Rollout waves as an operator asks for them: the spec, the order of hosts, the waves.

1. :func:`parse_waves`: ``"1,10%,50%,100%"`` -> wave sizes, like Ansible's ``serial``: each
   entry is one wave's size, N hosts or P% of the task's hosts (rounded up, at least 1); the
   last size repeats until every host is in a wave. A bad spec is one line (exit code 2).
   The first entry may instead be one ``vars.`` or ``group:`` target term
   (``vars.tier=canary,100%``): wave 1 is the task's hosts that term selects, the sizes after
   it split the rest (a percentage is still of all the task's hosts).
2. :class:`WaveSpec`: the sizes, the order (``inventory``: the task's job order; ``random``:
   shuffled with ``--wave-seed`` or else the task id as seed, so stable across restarts, and a
   dry run can show the very draw a submit with that seed makes; ``by-group``: round robin over
   the hosts' first group, so each wave spreads the groups), the pause, the gate and the check
   between waves.
3. :func:`split`: job sequence numbers -> the waves (lists of sequence numbers).

The queue side is ``scheduler.queue.waves``; the controller is ``scheduler.submission.rollout``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.errors import ValidationError
from scheduler.parse import Limit, parse_limit
from scheduler.submission.targets import Selector, parse_target

__all__ = ["GATES", "ORDERS", "MAX_WAVES", "WaveSpec", "parse_waves", "split", "wave_spec"]

ORDERS = ("inventory", "random", "by-group")
GATES = ("none", "approve")
MAX_WAVES = 1_000  # more waves than this is a typo, not a rollout
MAX_CHECK = 2_000  # characters of a --wave-check command
MAX_SEED = 2**31 - 1


WAVE_TERMS = ("vars.", "group:")  # what a first wave may be picked by


def _wave_term(part: str) -> Selector:
    selectors = parse_target(part).selectors
    if len(selectors) != 1 or selectors[0].exclude or selectors[0].intersect:
        raise ValidationError(f"--waves: the first wave's term {part!r} must be one "
                              "vars.KEY=VALUE or group:NAME term, without '!' or '&'")
    return selectors[0]


def parse_waves(text: str) -> tuple[Limit | Selector, ...]:
    """``"1,10%,100%"`` -> the wave sizes; ``"vars.tier=canary,100%"``: the first wave is the
    hosts a target term selects (a ``Selector``); ``ValidationError`` (one line) if one is
    bad."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ValidationError(f"--waves {text!r} must be sizes separated by commas",
                              hint="e.g. --waves 1,10%,50%,100%")
    out: list[Limit | Selector] = []
    for n, part in enumerate(parts):
        if part.startswith(WAVE_TERMS):
            if n:
                raise ValidationError(f"--waves {text!r}: only the first wave can be a target "
                                      f"term ({part!r} is wave {n + 1})",
                                      hint="e.g. --waves vars.tier=canary,10%,100%")
            if len(parts) == 1:
                raise ValidationError(f"--waves {text!r} needs the sizes of the waves after "
                                      "its first", hint=f"e.g. --waves {part},100%")
            out.append(_wave_term(part))
        else:
            out.append(parse_limit(part, "--waves"))
    return tuple(out)


@dataclass(frozen=True)
class WaveSpec:
    """How a task is rolled out in waves (what ``submit --waves ...`` asked for)."""

    sizes: tuple[Limit | Selector, ...]  # the first may be a target term (``first``)
    order: str = "inventory"
    pause_s: float = 0.0  # between waves
    gate: str = "none"  # approve: wait for `fleetsched tasks continue`
    check: str | None = None  # a shell command run on a finished wave's hosts
    seed: int | None = None  # of the random order (None: the task id)

    def __post_init__(self) -> None:
        if not self.sizes:
            raise ValidationError("--waves needs at least one size")
        if self.order not in ORDERS:
            raise ValidationError(f"--wave-order {self.order!r} must be one of {', '.join(ORDERS)}")
        if self.gate not in GATES:
            raise ValidationError(f"--wave-gate {self.gate!r} must be one of {', '.join(GATES)}")
        if not 0 <= self.pause_s <= 7 * 86400:
            raise ValidationError(f"--wave-pause {self.pause_s:g}s must be from 0 to 7 days")
        if self.check is not None and (not self.check.strip() or len(self.check) > MAX_CHECK
                                       or "\n" in self.check):
            raise ValidationError(f"--wave-check must be one line of 1 to {MAX_CHECK} characters")
        if self.seed is not None and self.order != "random":
            raise ValidationError("--wave-seed applies to --wave-order random only")

    @property
    def first(self) -> Selector | None:
        """The target term that picks wave 1, if the spec starts with one."""
        return self.sizes[0] if self.sizes and isinstance(self.sizes[0], Selector) else None

    def policy(self) -> dict[str, Any]:
        """What the controller reads from the task hash (``wave_policy``) and SQL keeps."""
        return {"sizes": ",".join(str(s) for s in self.sizes), "order": self.order,
                "pause_ms": int(round(self.pause_s * 1000)), "gate": self.gate,
                "check": self.check, **({"seed": self.seed} if self.seed is not None else {})}

    def describe(self) -> str:
        between = [f"pause {self.pause_s:g}s"] if self.pause_s else []
        if self.gate == "approve":
            between.append("operator approval (fleetsched tasks continue)")
        between += [f"check `{self.check}` on the wave's hosts"] if self.check else []
        seed = f" (seed {self.seed})" if self.seed is not None else ""
        return (f"{','.join(str(s) for s in self.sizes)} in {self.order} order{seed}"
                + (f"; between waves: {', then '.join(between)}" if between else ""))


def wave_spec(waves: str | None, *, order: str | None = None, pause: str | None = None,
              gate: str | None = None, check: str | None = None, seed: str | None = None,
              flag: str = "--") -> WaveSpec | None:
    """The spec from what was typed (``submit`` flags or task file keys, named with ``flag``:
    ``--`` for ``--wave-order``, ``""`` for ``wave_order``); None without waves."""
    from scheduler.parse import parse_duration

    def name(key: str) -> str:
        return f"--{key}" if flag == "--" else key.replace("-", "_")
    if waves is None:
        given = [k for k, v in (("wave-order", order), ("wave-pause", pause),
                                ("wave-gate", gate), ("wave-check", check),
                                ("wave-seed", seed)) if v]
        if given:
            raise ValidationError(f"{name(given[0])} needs {name('waves')}",
                                  hint=f"e.g. {name('waves')} 1,10%,100%")
        return None
    try:
        sizes = parse_waves(waves)
    except ValidationError as exc:
        raise ValidationError(str(exc).replace("--waves", name("waves")), hint=exc.hint) from None
    pause_s = 0.0
    if pause and pause not in ("0", "0s"):
        pause_s = parse_duration(pause, name("wave-pause")).total_seconds()
    seed_n = None
    if seed is not None:
        text = str(seed).strip()
        if not text.isascii() or not text.isdigit() or int(text) > MAX_SEED:
            raise ValidationError(f"{name('wave-seed')} {seed!r} must be a number from 0 to "
                                  f"{MAX_SEED}")
        seed_n = int(text)
    try:
        return WaveSpec(sizes, order=order or "inventory", pause_s=pause_s,
                        gate=gate or "none", check=check, seed=seed_n)
    except ValidationError as exc:
        raise ValidationError(str(exc).replace("--wave-", name("wave-")), hint=exc.hint) from None


def _ordered(seqs: Sequence[int], hosts: Sequence[str], order: str, seed: str,
             groups: Mapping[str, str]) -> list[int]:
    if order == "random":
        out = list(seqs)
        random.Random(f"fleetsched-waves-{seed}").shuffle(out)
        return out
    if order == "by-group":
        buckets: dict[str, list[int]] = {}
        for s in seqs:
            buckets.setdefault(groups.get(hosts[s], ""), []).append(s)
        lanes = [buckets[g] for g in sorted(buckets)]
        return [lane[i] for i in range(max(map(len, lanes), default=0))
                for lane in lanes if i < len(lane)]
    return list(seqs)


def split(spec: WaveSpec, hosts: Sequence[str], *, seed: str,
          groups: Mapping[str, str] | None = None,
          first: Collection[str] | None = None) -> list[list[int]]:
    """The waves of a task whose job ``n`` runs on ``hosts[n]``: lists of job numbers.

    ``seed``: what makes ``random`` stable (``--wave-seed``, else the task id);
    ``groups``: each host's first group (``by-group``); ``first``: the hosts the spec's first
    term selects (``WaveSpec.first``), which make wave 1."""
    order = _ordered(range(len(hosts)), hosts, spec.order, seed, groups or {})
    waves: list[list[int]] = []
    sizes = spec.sizes
    if spec.first is not None:
        if first is None:
            raise TypeError("split: the spec's first wave is a target term: pass first")
        picked = set(first)
        wave = [s for s in order if hosts[s] in picked]
        if not wave:
            raise ValidationError(f"--waves: the first wave's term {str(spec.first)!r} selects "
                                  "none of the task's hosts")
        waves.append(wave)
        order = [s for s in order if hosts[s] not in picked]
        sizes = spec.sizes[1:]
    i = 0
    while i < len(order):
        step = len(waves) - (1 if spec.first is not None else 0)
        limit = sizes[min(step, len(sizes) - 1)]
        assert isinstance(limit, Limit)
        size = limit.of(len(hosts))
        waves.append(order[i:i + size])
        i += size
        if len(waves) > MAX_WAVES:
            raise ValidationError(f"--waves {','.join(map(str, spec.sizes))} makes more than "
                                  f"{MAX_WAVES} waves of {len(hosts)} hosts",
                                  hint="end with a bigger size, e.g. 100%")
    return waves
