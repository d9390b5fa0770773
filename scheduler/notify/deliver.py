"""Sending one notice to one target, once: a JSON POST (urllib) or a mail (smtplib).

:func:`send` either returns (the receiver took it: HTTP 2xx, or the SMTP server accepted the
mail; a redirect is not followed and is no delivery) or raises :class:`DeliveryError` whose message is one line with no secret in it (the
webhook URL's path and query, the SMTP password are masked). Every network step has a timeout
(``TIMEOUT_S``), so a receiver that hangs costs the sender loop seconds, never the queue.
Retrying is the outbox's business (``scheduler.notify.outbox``), not this module's.
"""

from __future__ import annotations

import http.client
import json
import smtplib
import socket
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from scheduler.errors import FleetschedError
from scheduler.notify.message import email
from scheduler.notify.targets import Smtp, Target
from scheduler.redact import MASK, mask_urls_rest, redact_text

__all__ = ["TIMEOUT_S", "DeliveryError", "send"]

TIMEOUT_S = 5.0  # connect and each read or write, for HTTP and SMTP alike
USER_AGENT = "fleetsched-notify/1"


class DeliveryError(FleetschedError):
    """A notice was not delivered: the receiver refused it, was down or did not answer."""

    exit_code = 1


def send(target: Target, doc: dict[str, Any], smtp: Smtp, timeout_s: float = TIMEOUT_S) -> None:
    """Deliver ``doc`` to ``target``; ``DeliveryError`` (one redacted line) if it was not."""
    try:
        if target.kind == "webhook":
            _post(target.value, doc, timeout_s)
        else:
            _mail(target.value, doc, smtp, timeout_s)
    except DeliveryError:
        raise
    except (OSError, http.client.HTTPException, smtplib.SMTPException, ValueError) as exc:
        raise DeliveryError(_reason(exc, target, smtp)) from None


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib would re-send a POST answered 301/302/303 as a GET without
    the notice, and count the page it lands on as delivered. A 3xx stays an ``HTTPError``."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def _post(url: str, doc: dict[str, Any], timeout_s: float) -> None:
    body = json.dumps(doc).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": USER_AGENT})
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            response.read(4096)
    except urllib.error.HTTPError as exc:  # any answer but 2xx, a redirect included
        if 300 <= exc.code < 400:  # where it points is not shown: it may hold the secret
            raise DeliveryError(f"HTTP {exc.code} {exc.reason}: the webhook answered with a "
                                "redirect, which is not followed (give the URL it points to)"
                                ) from None
        raise DeliveryError(f"HTTP {exc.code} {exc.reason}") from None


def _mail(address: str, doc: dict[str, Any], smtp: Smtp, timeout_s: float) -> None:
    msg = email(doc, smtp.sender, address)
    context = ssl.create_default_context()  # certificates and host names checked
    client = (smtplib.SMTP_SSL(smtp.host, smtp.port, timeout=timeout_s, context=context)
              if smtp.tls == "ssl" else smtplib.SMTP(smtp.host, smtp.port, timeout=timeout_s))
    with client:
        if smtp.tls == "starttls":
            client.starttls(context=context)
        if smtp.user:
            client.login(smtp.user, smtp.password or "")
        refused = client.send_message(msg)
        if refused:
            raise DeliveryError(f"the SMTP server refused {address}")


def _reason(exc: BaseException, target: Target, smtp: Smtp) -> str:
    """One line for an exception, with the URL shown as ``target.shown`` and secrets masked."""
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    if isinstance(exc, socket.timeout | TimeoutError):
        text = f"no answer within the timeout ({type(exc).__name__})"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if target.kind == "webhook":
        text = text.replace(target.value, target.shown)
        parts = urlsplit(target.value)  # an error may quote the path or query on its own,
        for rest in (parts.path, parts.query, parts.fragment):  # as is or escaped (InvalidURL)
            for form in (rest, repr(rest)[1:-1]) if len(rest) >= 3 else ():
                text = text.replace(form, "/...")
        text = mask_urls_rest(text)
    if smtp.password and len(smtp.password) >= 3:
        text = text.replace(smtp.password, MASK)
    return redact_text(text)[:500]
