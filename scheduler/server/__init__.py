"""``fleetsched server``: the HTTP API under ``/api/v1`` (FastAPI on uvicorn; issue 28).

As thin as the CLI: a route parses JSON, checks the bearer token and the role through
``scheduler.verbs.access``, calls one verb of ``scheduler.verbs`` and renders JSON; the rule, the
check and the audit event stay in the verb.

- ``app``: ``create_app(settings)``, the application: the routers, the OpenAPI document at
  ``/api/v1/openapi.json``, the error handlers;
- ``service``: the process around the app: logging, the TLS files checked, uvicorn;
  ``openapi``: the document as published in docs/api/openapi.json;
- ``observe``: each request timed once and told to ``metrics`` (Prometheus at ``/metrics``)
  and ``access_log`` (one line per request);
- ``errors``: a ``FleetschedError`` as JSON with the CLI's exit code, message and hint, and
  its HTTP status;
- ``auth``: ``Authorization: Bearer fst_...`` to the request's ``Principal``, checked on every
  request, and the role's check per verb;
- ``paging``: ``limit``/``offset`` of list endpoints and the page they answer;
- ``tasks``: submit, list, show, one host's output, the controls (cancel, pause, resume,
  continue, retry-failed, reprioritize), and one job's attempts;
- ``fleet``: status, hosts (list, show, history) and groups;
- ``inventory``: hosts check (a page per request), import (text), export; groups limit and
  remove;
- ``task_jobs``: a task's jobs a page at a time; ``events``: following a task as Server-Sent
  Events, one poller per followed task for every follower;
- ``windows``: windows list, show, add, assign, unassign, remove, approve;
- ``schedules``: schedules list, show, add, remove, pause, resume;
- ``reports``: the audit report, as JSON or CSV;
- ``sso``: ``/auth`` login, callback, session and logout (OpenID Connect single sign-on), and
  the principal of a session cookie (with the CSRF check of a cookie's write);
- ``hardening``: failed authentications rate limited, body size limit, security headers
  (``headers``: the headers themselves);
- ``ids``: path parameters naming a row, bounded as the record stores them.
"""

__all__ = ["app", "auth", "errors", "events", "fleet", "inventory", "paging", "reports",
           "schedules", "task_jobs", "tasks", "windows", "hardening", "headers", "ids", "sso"]
