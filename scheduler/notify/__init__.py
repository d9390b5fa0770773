"""Notifications: telling operators when a task fails, aborts or loses jobs, when a schedule
misses an occurrence, and when a window that needs approval is about to open without one
(docs/guides/notifications.md).

- ``targets``: webhook URLs and ``mailto:`` addresses as typed; ``Policy`` (who is told what).
- ``message``: the JSON document (with Slack's one-line ``text``) and the mail of a notice.
- ``deliver``: one HTTP POST or one SMTP mail, with timeouts; ``DeliveryError``.
- ``detect``: the recorder's ``on_batch`` hook, writing outbox rows in the fold's transaction.
- ``outbox``: the ``Sender`` loop that delivers, retries with backoff and records each try.
"""

from scheduler.notify.deliver import DeliveryError, send
from scheduler.notify.detect import Detector
from scheduler.notify.message import payload
from scheduler.notify.outbox import Sender, list_notifications
from scheduler.notify.targets import KINDS, Policy, Smtp, Target, parse_target, parse_targets

__all__ = ["KINDS", "DeliveryError", "Detector", "Policy", "Sender", "Smtp", "Target",
           "list_notifications", "parse_target", "parse_targets", "payload", "send"]
