"""Old import path of the executor contract, kept as an alias for plugins written against it.

The contract an action codes against (``Host``, ``HostSession``, ``CommandResult``,
``Executor``) lives in :mod:`tasks.host`, where both the actions and the executors can import
it. ``from workers.executors.base import Host`` keeps working; new code imports ``tasks.host``
(docs/actions.md, "Writing a plugin").
"""

from tasks.host import CommandResult, Executor, Host, HostSession

__all__ = ["CommandResult", "Executor", "Host", "HostSession"]
