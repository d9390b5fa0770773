"""The alert rules and the dashboard shipped in ansible/monitoring/ are valid and name only
metrics fleetsched serves: ``promtool check rules`` and ``promtool test rules`` (the rules'
unit tests fire each alert on made-up series), and every ``fleetsched_*`` name in a rule or a
panel query is one the worker node (``workers.metrics``) or the exporter
(``scheduler.monitoring``) exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from scheduler.monitoring import exported_names
from tests.servers import missing
from workers.metrics import NodeMetrics
from workers.slots import Slots

HERE = Path(__file__).resolve().parents[2] / "ansible" / "monitoring"
NAME = re.compile(r"\bfleetsched_[a-z_]+\b")
BUILTIN = {"up"}  # Prometheus' own per-target metric


def served() -> set[str]:
    node = {s.name for family in NodeMetrics(Slots(4)).registry.collect()
            for s in family.samples}
    return node | exported_names()


def rule_expressions() -> list[str]:
    groups = yaml.safe_load((HERE / "alerts.yml").read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def panel_expressions() -> list[str]:
    dashboard = json.loads((HERE / "dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


@pytest.mark.parametrize("args", [["check", "rules", "alerts.yml"],
                                  ["test", "rules", "alerts_test.yml"]])
def test_promtool_accepts_the_rules_and_their_unit_tests_pass(args: list[str]) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        missing("promtool", "apt-get install prometheus (Debian ships promtool in it)")
    done = subprocess.run([promtool, *args], cwd=HERE, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_metric_named_is_one_fleetsched_serves(source: str) -> None:
    exprs = rule_expressions() if source == "rules" else panel_expressions()
    names = {n for e in exprs for n in NAME.findall(e)}
    assert names, exprs
    unknown = sorted(names - served())
    assert not unknown, f"{source} name metrics nobody exports: {unknown}"
    # and any other metric named is a built-in one
    words = {w for e in exprs for w in re.findall(r"\b([a-z_]+)\{", e)}
    assert words - names - BUILTIN == set()


def test_the_check_itself_catches_a_misspelt_metric() -> None:
    assert "fleetsched_recorder_lag" not in served()
    assert "fleetsched_recorder_lag_events" in served()
    assert "fleetsched_jobs_finished_total" in served()
