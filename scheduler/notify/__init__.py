"""Notifications: telling operators when a task fails, aborts or loses jobs, when a schedule
misses an occurrence, and when a window that needs approval is about to open without one
(docs/guides/notifications.md).

- ``targets``: webhook URLs and ``mailto:`` addresses as typed; ``Policy`` (who is told what).
- ``message``: the JSON document (with Slack's one-line ``text``) and the mail of a notice.
- ``deliver``: one HTTP POST or one SMTP mail, with timeouts; ``DeliveryError``.
- ``detect``: the recorder's ``on_batch`` hook, writing outbox rows in the fold's transaction.
- ``outbox``: the ``Sender`` loop that delivers, retries with backoff and records each try.

The names below load their module on first use (PEP 562): ``targets`` alone is light, and a
worker node checks its targets before its first claim without loading the record.
"""

from __future__ import annotations

from scheduler.lazy import lazy_names

_HOME = {
    "DeliveryError": "scheduler.notify.deliver", "send": "scheduler.notify.deliver",
    "Detector": "scheduler.notify.detect", "payload": "scheduler.notify.message",
    "Sender": "scheduler.notify.outbox", "list_notifications": "scheduler.notify.outbox",
    **dict.fromkeys(("KINDS", "Policy", "Smtp", "Target", "parse_target", "parse_targets"),
                    "scheduler.notify.targets"),
}

__all__ = sorted(_HOME)
__getattr__ = lazy_names(__name__, _HOME)
