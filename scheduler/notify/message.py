"""What a notice says: the JSON a webhook receives and the e-mail a mailbox receives.

:func:`payload` builds the JSON document from the facts the detector gathered (``kind``, the
task's id, name, action, operator, state and counters (``scheduler.progress``: ``failed`` by
the host and ``lost`` with the worker, side by side), the hosts of its first failed or lost
jobs; or the schedule, its occurrence and why it was missed; or the window awaiting approval).
Its ``text`` field is one line Slack (and Mattermost, Rocket.Chat, Teams' Slack-compatible
hooks) shows as the message.
:func:`email` turns the same document into a mail: the line as the subject, the document below,
with its own ``Date`` and ``Message-ID``.
"""

from __future__ import annotations

import json
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from scheduler.progress import from_counts

__all__ = ["FAILED_HOSTS_MAX", "email", "payload", "text"]

FAILED_HOSTS_MAX = 10  # hosts named in ``failed_hosts``; ``failed_hosts_more`` counts the rest


def text(doc: dict[str, Any]) -> str:
    """The notice in one line (Slack's ``text``, the mail's subject)."""
    kind = doc.get("kind")
    if kind == "missed":
        when = f" occurrence {doc['occurrence']}" if doc.get("occurrence") else ""
        return (f"[fleetsched] schedule {doc.get('schedule')}{when} missed: "
                f"{doc.get('error') or 'no reason recorded'}")
    if kind == "approval":
        awaited = ", ".join(doc.get("awaited") or []) or "an approval"
        return (f"[fleetsched] window {doc.get('window')} (version {doc.get('version', 1)}) "
                f"opens {doc.get('opens')} and awaits {awaited}: its jobs will not run in it "
                "until approved (fleetsched windows approve, or POST "
                f"/api/v1/windows/{doc.get('window')}/approve with your token)")
    if kind == "test":
        return f"[fleetsched] test notice from {doc.get('operator')}"
    if kind == "stopped":
        return (f"[fleetsched] task {doc.get('task_id')} rollout stopped after wave "
                f"{doc.get('wave')}: {doc.get('error') or 'no reason recorded'}; it waits for "
                f"`fleetsched tasks continue {doc.get('task_id')}` or `tasks cancel`")
    name = f" ({doc['name']})" if doc.get("name") else ""
    # The counts in the words every view uses (scheduler.progress: failed by the host, lost
    # with the worker, each job once).
    counts = from_counts(doc.get("counts") or {}).counts_text()
    hosts = doc.get("failed_hosts") or []
    more = doc.get("failed_hosts_more") or 0
    shown = f"; failed hosts: {', '.join(hosts)}" + (f" and {more} more" if more else "") \
        if hosts else ""
    verb = {"failed": "failed", "aborted": "was aborted", "lost": "has lost jobs"}.get(
        str(kind), str(kind))
    return (f"[fleetsched] task {doc.get('task_id')}{name} {verb}: {doc.get('action')} by "
            f"{doc.get('operator')}, {counts}{shown}")


def payload(kind: str, **facts: Any) -> dict[str, Any]:
    """The JSON document of one notice (``facts`` as gathered; ``None`` values dropped)."""
    doc: dict[str, Any] = {"source": "fleetsched", "kind": kind}
    doc.update({k: v for k, v in facts.items() if v is not None})
    doc["text"] = text(doc)
    return doc


def email(doc: dict[str, Any], sender: str, to: str) -> EmailMessage:
    """A plain-text mail of ``doc``: the one line as subject and first line, the JSON below."""
    msg = EmailMessage()
    msg["Subject"] = doc.get("text", "[fleetsched] notice")
    msg["From"] = sender
    msg["To"] = to
    # Mailboxes sort by Date and thread and deduplicate by Message-ID; some servers add
    # neither, and spam filters mark a mail without them. The id's domain is the sender's
    # (make_msgid's default asks DNS for this node's name, which may hang).
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = make_msgid("fleetsched", domain=sender.rpartition("@")[2] or "fleetsched")
    msg.set_content(f"{doc.get('text', '')}\n\n{json.dumps(doc, indent=2, sort_keys=True)}\n")
    return msg
