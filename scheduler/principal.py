"""Who acts: the principal every operator verb takes and every change it records names.

Two ways in: the local CLI, acting as the operator name of the settings (``--as``,
``$FLEETSCHED_OPERATOR`` or the OS user). The name is what the record's events store as
``operator``; ``via`` says how that name was established. The HTTP API's tokens
(``scheduler.access.tokens``) make principals with ``via`` ``token:<id>``, a role and a tenant;
single sign-on (``scheduler.access.oidc``) makes them with ``via`` ``oidc:<issuer>#<subject>``,
the person's username or email as the name, and the role and tenant their groups map to.
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
    ``token:<id>``: an API token, whose ``role`` and ``tenant`` it carries;
    ``oidc:<issuer>#<sub>``: a person logged in by single sign-on)."""

    name: str
    via: str = LOCAL_CLI
    role: str | None = None  # None: the local CLI, which may do everything (scheduler.access)
    tenant: str | None = None  # a customer's scope; None: every tenant
    source: str | None = None  # the client's address (the API's request); None: the local CLI

    @classmethod
    def local(cls, settings: Settings) -> Principal:
        """The operator of a local command: the settings' ``operator``."""
        return cls(name=settings.operator)

    def audit(self) -> dict[str, str | None]:
        """What every event this principal records keeps in its ``data`` as ``principal``
        (``scheduler.record.audit``, the stream's operator events): how it was authenticated,
        its role, tenant and address; the name is the event's ``operator``. Never a secret."""
        return {"via": self.via, "role": self.role, "tenant": self.tenant, "source": self.source}

    def __str__(self) -> str:
        return self.name
