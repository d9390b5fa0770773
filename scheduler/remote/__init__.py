"""The CLI in remote mode: the operator verbs over ``fleetsched server``'s HTTP API.

Each module mirrors one of ``scheduler.verbs`` (same function names and signatures, the
``stores`` argument being a :class:`client.Client` and the principal unused: the server records
the token's owner) and returns the same result types, rebuilt from the JSON, so that a command
renders the same output in both modes (``scheduler.cli.context.verbs`` picks one).

- ``client``: the HTTP connection, the token, and errors as the CLI's;
- ``status``, ``submit``, ``tasks``, ``follow``, ``inventory``, ``windows``, ``schedules``,
  ``reports``, ``tenants``, ``tokens``: the verbs of the same names.
"""

__all__ = ["client", "follow", "inventory", "reports", "schedules", "status", "submit",
           "tasks", "tenants", "tokens", "windows"]
