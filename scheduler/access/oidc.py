"""Single sign-on with OpenID Connect: the authorization code flow with PKCE (S256) against the
configured issuer, and the role a person's groups give.

1. ``provider(settings)``: the issuer's discovery document, fetched once per process, and its
   keys through PyJWT's ``PyJWKClient`` (cached; fetched again for a key id it does not know,
   so the issuer can rotate keys).
2. ``start``: a login's random state, nonce and PKCE verifier, and the issuer's URL the browser
   is sent to (with the verifier's S256 challenge, never the verifier).
3. ``finish``: the code exchanged at the token endpoint (with the verifier and the client's
   secret), then the ID token verified by PyJWT: signature by one of the issuer's keys with an
   asymmetric algorithm it announces, issuer, audience (and ``azp``), expiry, issued-at, and
   the login's nonce. Any failure is one ``UnauthenticatedError`` line.
4. ``identity``: the principal of the verified claims: ``name`` the preferred username or
   email, ``via`` ``oidc:<issuer>#<sub>``, role and tenant from ``oidc_roles`` (the first entry
   the ``oidc_roles_claim`` matches); no entry matches: ``ForbiddenError``.

The client secret may be an ``@env:NAME`` / ``@file:/path`` reference (``tasks.secrets``); it
is read when needed and never logged or returned.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from scheduler.access.roles import CUSTOMER_ROLES, ROLES
from scheduler.errors import ConfigError, FleetschedError, ForbiddenError, UnauthenticatedError
from scheduler.principal import Principal

if TYPE_CHECKING:
    import jwt

    from scheduler.config import Settings

__all__ = ["Login", "ProviderError", "finish", "identity", "provider", "roles", "start",
           "verify_id_token"]

# Signature algorithms an ID token may use: public-key ones only. "none" and the HMAC ones
# (signed with the client secret, which more parties know) are refused whatever the issuer says.
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
              "ES512", "EdDSA")
LEEWAY_S = 30  # clock skew allowed between the issuer and this server, for exp, iat and nbf
HTTP_TIMEOUT_S = 10
SCOPES = "openid profile email"


class ProviderError(FleetschedError):
    """The identity provider could not be reached, or answered with something unusable."""


@dataclass(frozen=True)
class Provider:
    """What discovery says of the issuer, and its keys."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    algorithms: tuple[str, ...]
    keys: jwt.PyJWKClient


@dataclass(frozen=True)
class Login:
    """One login under way, kept by the server between ``start`` and ``finish``."""

    state: str
    nonce: str
    verifier: str
    redirect_uri: str


def _get_json(url: str) -> dict[str, Any]:
    import httpx

    try:
        reply = httpx.get(url, timeout=HTTP_TIMEOUT_S)
        reply.raise_for_status()
        data = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderError(f"the identity provider's {url} cannot be read: "
                            f"{type(exc).__name__}", hint="check oidc_issuer") from None
    if not isinstance(data, dict):
        raise ProviderError(f"the identity provider's {url} is not a JSON object")
    return data


@functools.lru_cache(maxsize=4)
def _discover(issuer: str) -> Provider:
    import jwt

    meta = _get_json(issuer.rstrip("/") + "/.well-known/openid-configuration")
    if meta.get("issuer") != issuer:
        raise ProviderError(f"the identity provider calls itself {meta.get('issuer')!r}, "
                            f"not {issuer!r}", hint="oidc_issuer must be its exact issuer URL")
    try:
        announced = meta.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = tuple(a for a in announced if a in ASYMMETRIC)
        found = Provider(issuer=issuer, authorization_endpoint=meta["authorization_endpoint"],
                         token_endpoint=meta["token_endpoint"], algorithms=algorithms,
                         keys=jwt.PyJWKClient(meta["jwks_uri"], cache_keys=True,
                                              timeout=HTTP_TIMEOUT_S))
    except (KeyError, TypeError) as exc:
        raise ProviderError(f"the identity provider's discovery document lacks {exc}") from None
    if not algorithms:
        raise ProviderError(f"the identity provider signs ID tokens only with {announced}, "
                            "none of them a public-key algorithm")
    return found


def provider(settings: Settings) -> Provider:
    """The configured issuer (``ConfigError`` when single sign-on is not configured)."""
    if not settings.oidc_issuer or not settings.oidc_client_id:
        raise ConfigError("single sign-on is not configured on this server",
                          hint="set oidc_issuer and oidc_client_id (docs/guides/sso.md)")
    return _discover(settings.oidc_issuer)


def roles(settings: Settings) -> list[tuple[str, str, str | None]]:
    """``oidc_roles`` as (claim value, role, tenant), each role checked against the table."""
    out = []
    for value, spec in settings.oidc_roles:
        role, _, tenant = spec.partition(":")
        if role not in ROLES:
            raise ConfigError(f"oidc_roles: {value!r} gives the unknown role {role!r}",
                              hint=f"roles: {', '.join(ROLES)}")
        if role in CUSTOMER_ROLES and not tenant:
            raise ConfigError(f"oidc_roles: {value!r} gives {role} without a tenant",
                              hint=f'write "{role}:CUSTOMER"')
        out.append((value, role, tenant or None))
    return out


def start(settings: Settings, redirect_uri: str) -> tuple[Login, str]:
    """A new login and the URL of the issuer's authorization endpoint for it."""
    found = provider(settings)
    roles(settings)  # a bad mapping is refused before anyone is sent to log in
    login = Login(state=secrets.token_urlsafe(32), nonce=secrets.token_urlsafe(32),
                  verifier=secrets.token_urlsafe(64), redirect_uri=redirect_uri)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(login.verifier.encode()).digest())
    query = urlencode({
        "response_type": "code", "client_id": settings.oidc_client_id,
        "redirect_uri": redirect_uri, "scope": SCOPES, "state": login.state,
        "nonce": login.nonce, "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256"})
    separator = "&" if "?" in found.authorization_endpoint else "?"
    return login, f"{found.authorization_endpoint}{separator}{query}"


def _client_secret(settings: Settings) -> str | None:
    from tasks.secrets import SecretError, SecretRef, parse_ref

    raw = settings.oidc_client_secret
    if not raw:
        return None
    try:
        ref = parse_ref(raw)
        if isinstance(ref, SecretRef):
            return ref.fetch()
    except SecretError:
        raise ConfigError("oidc_client_secret is a reference this server cannot read",
                          hint="set the variable or file it names for the server") from None
    return raw if ref is None else ref


def _exchange(settings: Settings, found: Provider, login: Login, code: str) -> str:
    """The ID token the token endpoint gives for ``code``."""
    import httpx

    form = {"grant_type": "authorization_code", "code": code,
            "redirect_uri": login.redirect_uri, "code_verifier": login.verifier}
    secret = _client_secret(settings)
    client_id = settings.oidc_client_id or ""
    auth = httpx.BasicAuth(client_id, secret) if secret is not None else None
    if auth is None:
        form["client_id"] = client_id  # a public client: PKCE alone binds the code
    try:
        reply = httpx.post(found.token_endpoint, data=form, auth=auth, timeout=HTTP_TIMEOUT_S,
                           headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise ProviderError(f"the identity provider's token endpoint cannot be reached: "
                            f"{type(exc).__name__}") from None
    if reply.status_code in (400, 401):
        raise UnauthenticatedError("the identity provider refused the login's code",
                                   hint="log in again: GET /api/v1/auth/login")
    try:
        reply.raise_for_status()
        token = reply.json()["id_token"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        raise ProviderError("the identity provider's token endpoint gave no ID token") from None
    if not isinstance(token, str):
        raise ProviderError("the identity provider's ID token is not a string")
    return token


def _signing_key(found: Provider, kid: object) -> Any:
    """The issuer's key named ``kid``; without a ``kid`` (which OpenID Connect allows when the
    issuer has one key), its only signing key, and none when it has several."""
    import jwt

    if kid is not None:
        return found.keys.get_signing_key(str(kid)).key
    keys = found.keys.get_signing_keys()
    if len(keys) != 1:
        raise jwt.InvalidTokenError("no kid, and the issuer has several keys")
    return keys[0].key


def verify_id_token(settings: Settings, found: Provider, token: str, nonce: str, *,
                    leeway: float = LEEWAY_S) -> dict[str, Any]:
    """The claims of ``token`` once verified; ``UnauthenticatedError`` otherwise (one line for
    every reason; the log of the caller may say which, never the token)."""
    import jwt

    refused = UnauthenticatedError("the identity provider's ID token is not valid for this "
                                   "server", hint="log in again: GET /api/v1/auth/login")
    try:
        key = _signing_key(found, jwt.get_unverified_header(token).get("kid"))
        claims: dict[str, Any] = jwt.decode(
            token, key, algorithms=list(found.algorithms), audience=settings.oidc_client_id,
            issuer=found.issuer, leeway=leeway,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]})
    except jwt.PyJWKClientConnectionError:
        raise ProviderError("the identity provider's keys cannot be fetched") from None
    except jwt.PyJWTError:
        raise refused from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != settings.oidc_client_id:
        raise refused
    if not isinstance(claims.get("nonce"), str) or not secrets.compare_digest(
            claims["nonce"], nonce):
        raise refused
    return claims


def finish(settings: Settings, login: Login, code: str) -> dict[str, Any]:
    """The verified ID token claims of the person who came back with ``code``."""
    found = provider(settings)
    return verify_id_token(settings, found, _exchange(settings, found, login, code), login.nonce)


def identity(settings: Settings, claims: dict[str, Any]) -> Principal:
    """The principal the verified ``claims`` stand for, or ``ForbiddenError``."""
    name = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])
    held = claims.get(settings.oidc_roles_claim)
    values = {str(v) for v in (held if isinstance(held, list) else [held]) if v is not None}
    for value, role, tenant in roles(settings):
        if value in values:
            return Principal(name=name, via=f"oidc:{settings.oidc_issuer}#{claims['sub']}",
                             role=role, tenant=tenant)
    raise ForbiddenError(f"{name} has no fleetsched role: no value of the "
                         f"{settings.oidc_roles_claim!r} claim is in oidc_roles",
                         hint="ask an administrator to map one of your groups to a role")
