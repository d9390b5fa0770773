"""The operator verbs: one function per thing an operator can ask, for every front end.

The CLI (and the HTTP API to come) parses, calls one of these, and renders; each verb takes
typed arguments and the acting ``scheduler.principal.Principal``, opens what it needs through
``stores.Stores``, and returns a typed result. The rule, the check and the audit event of a
verb live below it (``scheduler.submission``, ``scheduler.inventory``, ``scheduler.windows``,
``scheduler.schedules``, ``scheduler.record``), so each is enforced in one place.

- ``stores``: the record and the queue a verb opens;
- ``submit``: submit (plan, confirm, record and queue), the workers' presence;
- ``tasks``: list, show, output, pause, resume, cancel, continue, retry-failed, reprioritize,
  and one job's attempts (``job``);
- ``follow``: the tasks' progress now, follow (watch), wait, the record behind the queue;
- ``windows``: service windows and freezes: add, assign, unassign, approve, remove, sync, and
  list, show, next;
- ``schedules``: recurring schedules: add, pause, resume, remove, and list, show, next;
- ``templates``: saved job templates: add (versions), remove, list, show, and run (through
  ``submit``);
- ``inventory``: hosts import, add, remove, check, and list, show, history, export; groups
  remove, limit and list;
- ``status``: the health checks, and one frame of the queue (``top``);
- ``reconcile``: repair the queue from the record;
- ``reports``: the audit report;
- ``tokens``: API tokens: create (shown once), list, revoke;
- ``access``: the HTTP API's principal from a token (``authenticate``), and its role's check
  (``authorize``);
- ``sso``: single sign-on for people: begin a login, complete it into a session, the session's
  principal, end it.
"""

__all__ = ["access", "follow", "inventory", "reconcile", "reports", "schedules", "status",
           "sso", "stores", "submit", "tasks", "templates", "tokens", "windows"]
