"""``read_running``: the hosts a task runs now, read from its shard's leases (real Redis: 7, 6.2
and a cluster, the ``queue`` fixture), and a customer's own running hosts chosen before the
list is cut, so other customers' longer-running jobs never crowd them out."""

from __future__ import annotations

from scheduler.queue.client import Queue
from scheduler.views.snapshot import read_running, read_tasks
from tests.queue_support import KEYS, make_task


def test_a_customers_running_hosts_are_chosen_before_the_list_is_cut(queue: Queue) -> None:
    # Given a task running on ten hosts, host-t.9 among them (the customer's one host)
    make_task(queue, "t", 10)
    assert len(queue.claim("w", 10).jobs) == 10
    [task] = read_tasks(queue.client, KEYS, ["t"])
    assert task is not None and task.running == 10
    # When the team's view is read: eight at most
    read_running(queue.client, KEYS, [task], limit=8)
    assert len(task.running_hosts) == 8
    # Then the customer's view, among its own hosts, shows its host whatever the others do
    read_running(queue.client, KEYS, [task], limit=8, hosts={"host-t.9"})
    assert [r["host"] for r in task.running_hosts] == ["host-t.9"]
    read_running(queue.client, KEYS, [task], limit=8, hosts=set())
    assert task.running_hosts == []
