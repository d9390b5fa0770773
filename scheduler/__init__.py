"""fleetsched's control side: settings, Redis key names, the queue core, submission, windows and
schedules, the SQL record, the CLI. Import the submodules (``scheduler.queue.client``,
``scheduler.config`` ...); docs/architecture.md lists what each one owns.
"""

__all__: list[str] = []
