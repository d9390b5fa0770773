"""The ``exit-signal`` channel request (RFC 4254 6.10), which paramiko drops.

sshd sends it instead of ``exit-status`` when the command it waits for was killed by a signal;
paramiko leaves ``exit_status`` at -1 and logs the request as unhandled. :class:`Transport`
keeps the signal's name on the channel (:func:`exit_signal`: ``"SIGKILL"``), so a job killed
by a signal says which one instead of showing an empty exit code.
"""

from __future__ import annotations

from typing import Any, ClassVar

import paramiko
from paramiko.common import MSG_CHANNEL_REQUEST

__all__ = ["Transport", "exit_signal"]

_ATTR = "fleetsched_exit_signal"


def _handle_request(chan: paramiko.Channel, m: paramiko.Message) -> None:
    start = m.packet.tell()
    if m.get_text() == "exit-signal":
        m.get_boolean()  # want reply: never for exit-signal
        name = m.get_text()
        setattr(chan, _ATTR, "SIG" + name if name.isalnum() and len(name) <= 16 else "a signal")
        chan.status_event.set()
        return
    m.packet.seek(start)
    paramiko.Channel._handle_request(chan, m)


class Transport(paramiko.Transport):
    """A paramiko transport whose channels keep an ``exit-signal``'s name."""

    _channel_handler_table: ClassVar[dict[int, Any]] = {**paramiko.Transport._channel_handler_table,
                              MSG_CHANNEL_REQUEST: _handle_request}


def exit_signal(chan: paramiko.Channel) -> str | None:
    """``"SIGKILL"`` when sshd said the command died of that signal, else None."""
    return getattr(chan, _ATTR, None)
