"""Who may do what through the HTTP API (issue 28 sections 2 and 3).

- ``roles``: the roles, a small table in code from each role to the verbs it may call, and the
  check (``check_role``);
- ``tokens``: API tokens: made (random, prefixed ``fst_``, shown once), stored hashed, listed,
  revoked, and checked on every request (``authenticate``);
- ``oidc``: single sign-on with OpenID Connect (code flow with PKCE, the ID token verified),
  and the role a person's groups give (``oidc_roles``);
- ``sessions``: people's sessions after single sign-on, and logins under way, in Redis.

A token carries its tenant (``Principal.tenant``); the reads listed in
``roles.TENANT_FILTERED`` filter by it in SQL (``scheduler.record.tenancy``), and a
tenant-scoped principal is refused every other verb.
"""

__all__ = ["oidc", "roles", "sessions", "tokens"]
