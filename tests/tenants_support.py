"""The inventories of two customers the tenant tests share: INI groups marked as a customer's
with the group variable ``fleetsched_tenant`` (as an Ansible inventory marks them)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ACME_AND_GLOBEX", "customers_ini"]


def customers_ini(**hosts_of: Sequence[str]) -> str:
    """One INI group per tenant (its name), holding ``hosts_of[tenant]`` and marked as that
    tenant's."""
    return "".join(f"[{tenant}]\n" + "".join(f"{host}\n" for host in hosts)
                   + f"[{tenant}:vars]\nfleetsched_tenant={tenant}\n"
                   for tenant, hosts in hosts_of.items())


# acme with two hosts, globex with one: what most tenant tests start from.
ACME_AND_GLOBEX = customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",))
