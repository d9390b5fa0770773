"""Who acts: the principal every operator verb takes and every change it records names.

Two ways in: the local CLI, acting as the operator name of the settings (``--as``,
``$FLEETSCHED_OPERATOR`` or the OS user). The name is what the record's events store as
``operator``; ``via`` says how that name was established. The HTTP API's tokens
(``scheduler.access.tokens``) make principals with ``via`` ``token:<id>``, a role and a tenant;
single sign-on (issue 28) will add a kind of its own here, not in every verb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.config import Settings

__all__ = ["LOCAL_CLI", "Principal"]

LOCAL_CLI = "local-cli"  # the OS user at a shell with the database and Redis credentials


@dataclass(frozen=True)
class Principal:
    """The acting principal: ``name`` is recorded as the events' ``operator``; ``via`` is how it
    was authenticated (``local-cli``: self-declared by whoever holds the credentials;
    ``token:<id>``: an API token, whose ``role`` and ``tenant`` it carries)."""

    name: str
    via: str = LOCAL_CLI
    role: str | None = None  # None: the local CLI, which may do everything (scheduler.access)
    tenant: str | None = None  # a customer's scope; None: every tenant

    @classmethod
    def local(cls, settings: Settings) -> Principal:
        """The operator of a local command: the settings' ``operator``."""
        return cls(name=settings.operator)

    def __str__(self) -> str:
        return self.name
