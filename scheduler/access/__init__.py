"""Who may do what through the HTTP API (issue 28 sections 2 and 3).

- ``roles``: the roles, a small table in code from each role to the verbs it may call, and the
  check (``check_role``);
- ``tokens``: API tokens: made (random, prefixed ``fst_``, shown once), stored hashed, listed,
  revoked, and checked on every request (``authenticate``);
- ``oidc``: single sign-on with OpenID Connect (code flow with PKCE, the ID token verified),
  and the role a person's groups give (``oidc_roles``);
- ``sessions``: people's sessions after single sign-on, and logins under way, in Redis.

Tenant scoping of queries (a customer role sees only its own hosts) is not built yet: a token
carries its tenant, and until the verbs filter by it a tenant-scoped principal is refused every
verb (``roles.TENANT_FILTERED`` is empty).
"""

__all__ = ["oidc", "roles", "sessions", "tokens"]
