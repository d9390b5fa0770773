"""People's sessions after single sign-on, and the logins under way, kept in Redis.

1. A login under way (``scheduler.access.oidc.Login``) is kept ``LOGIN_TTL_S`` under the
   SHA-256 of its state and taken with GETDEL: a state is good for one callback, so a replayed
   callback finds nothing.
2. A session is an opaque random id (the cookie) for a principal and a CSRF token. Redis keeps
   it under the SHA-256 of the id, with the session's lifetime as TTL: a copy of Redis gives no
   usable cookie, and an ended session (logout, expiry) is gone for every server process.
3. The keys live on shard 0 under the queue's prefix (``scheduler.queue.keys``), so sessions
   survive a server restart and serve every server process of the deployment.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from scheduler.access.oidc import Login
from scheduler.principal import Principal

if TYPE_CHECKING:
    import redis

    from scheduler.queue.keys import Keys

__all__ = ["LOGIN_TTL_S", "Session", "end", "find", "keep_login", "open_session", "take_login"]

LOGIN_TTL_S = 600  # a person has this long at the identity provider's login page


@dataclass(frozen=True)
class Session:
    """A person's session: who, and the token their writes must echo (``X-CSRF-Token``)."""

    principal: Principal
    csrf: str


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def keep_login(client: redis.Redis, keys: Keys, login: Login) -> None:
    client.set(keys.login(_digest(login.state)), json.dumps(asdict(login)), ex=LOGIN_TTL_S)


def take_login(client: redis.Redis, keys: Keys, state: str) -> Login | None:
    """The login of ``state``, once: a second call (a replay) or a late one finds None."""
    raw = client.getdel(keys.login(_digest(state)))
    return Login(**json.loads(raw)) if raw else None


def open_session(client: redis.Redis, keys: Keys, principal: Principal,
                 seconds: int) -> tuple[str, Session]:
    """A new session for ``principal``: its id (for the cookie, never stored) and the session."""
    session_id = secrets.token_urlsafe(32)
    session = Session(principal=principal, csrf=secrets.token_urlsafe(32))
    client.set(keys.session(_digest(session_id)),
               json.dumps({"principal": asdict(principal), "csrf": session.csrf}), ex=seconds)
    return session_id, session


def find(client: redis.Redis, keys: Keys, session_id: str) -> Session | None:
    """The live session of ``session_id``, or None (unknown, ended or expired)."""
    raw = client.get(keys.session(_digest(session_id)))
    if not raw:
        return None
    data = json.loads(raw)
    return Session(principal=Principal(**data["principal"]), csrf=data["csrf"])


def end(client: redis.Redis, keys: Keys, session_id: str) -> None:
    client.delete(keys.session(_digest(session_id)))
