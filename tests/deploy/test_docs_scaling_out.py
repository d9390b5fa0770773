"""The scaling-out docs say what the code and the Ansible role do (issue 26 section 6): the
shard tags they name are the ones ``Shards`` makes, the cluster they tell you to create has a
replica per master, and the failover time they give is for the role's own
``cluster-node-timeout``."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from scheduler.queue.shards import Shards

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "docs" / "guides" / "install.md"
SETTINGS = ROOT / "docs" / "reference" / "settings.md"
ANSIBLE_README = ROOT / "ansible" / "README.md"
REDIS_DEFAULTS = ROOT / "ansible" / "roles" / "fleetsched_redis" / "defaults" / "main.yml"


def scaling_out() -> str:
    text = INSTALL.read_text()
    return text[text.index("## Scaling out"):text.index("## For development")]


def test_the_shard_tags_the_docs_name_are_those_of_a_queue_of_three_shards() -> None:
    tags = [k.tag for k in Shards("fs", 3).all]
    for doc in (scaling_out(), SETTINGS.read_text()):
        named = re.findall(r"`(\{fs(?::\d+\.\d+)?\})`", doc)  # `{fs}`, `{fs:1.8}` ...
        assert named[:3] == tags, named


def test_the_cluster_the_docs_create_has_a_replica_for_each_master() -> None:
    for doc in (scaling_out(), ANSIBLE_README.read_text()):
        create = re.search(r"redis-cli .*?--cluster create (.*?)--cluster-replicas (\d)", doc,
                           re.DOTALL)
        assert create, "no cluster creation step"
        nodes = re.findall(r"\d+\.\d+\.\d+\.\d+:\d+", create.group(1))
        assert create.group(2) == "1" and len(nodes) == 6


def test_the_failover_time_the_docs_give_is_for_the_role_s_node_timeout() -> None:
    timeout_ms = yaml.safe_load(REDIS_DEFAULTS.read_text())["fleetsched_redis_cluster_node_timeout"]
    doc = " ".join(scaling_out().split())
    assert f"fleetsched_redis_cluster_node_timeout: {timeout_ms}`) makes that about 8 s" in doc
    assert "replaced by its replica in 2-3 s" not in doc  # the 1 s test cluster's figure
