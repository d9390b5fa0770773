"""Submitting and controlling tasks: from an operator's request to queued jobs and back.

- ``targets``: target expressions (which hosts);
- ``taskfile``: YAML task files;
- ``submit``: the request, the rollout policy, the plan and its record in SQL;
- ``fanout``: the Redis half of a submission (host hashes, task hash, jobs);
- ``control``: pause, resume, cancel, retry-failed, reprioritize;
- ``waves``: rollout waves as asked (sizes, order, pause, gate, check) and the split into waves;
- ``rollout``: the wave controller's steps and ``tasks continue``;
- ``taskinfo``: what ``tasks list`` and ``tasks show`` read;
- ``reconcile``: finish fan-outs and give Redis back what SQL says it should hold.
"""

__all__ = ["control", "fanout", "reconcile", "rollout", "submit", "targets", "taskfile",
           "taskinfo", "waves"]
