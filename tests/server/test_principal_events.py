"""Every event an operator's verb records names its principal: the name as ``operator``, and in
``data`` a ``principal`` saying how it was authenticated (``via`` ``token:<id>`` or
``local-cli``), its role, tenant and the client's address, never a secret. Through a real
``fleetsched server`` and through the CLI, on the same record."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import Api
from tests.submit_support import data, events, sql_rows

BODY = {"action": "command", "target": "group:web", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"}


def _principals(api: Api, task_id: int, kinds: tuple[str, ...]) -> dict[str, Any]:
    rows = events(api.database_url, task_id, kinds=kinds)
    assert {r.kind for r in rows} == set(kinds)
    return {r.kind: (r.operator, data(r).get("principal")) for r in rows}


def test_events_of_verbs_called_through_the_api_name_the_token_role_and_address(
        api: Api) -> None:
    token = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
    [token_id] = [r.id for r in sql_rows(api.database_url, "SELECT id FROM api_tokens")]
    # When a task is submitted, paused, resumed and cancelled through the API
    reply = api("POST", "/tasks", token, json=BODY)
    assert reply.status_code == 201, reply.text
    task_id = reply.json()["task_id"]
    for verb in ("pause", "resume", "cancel"):
        assert api("POST", f"/tasks/{task_id}/{verb}", token).status_code == 200
    # Then each event names the token's owner and, as its principal, the token, role and address
    expected = ("deploy-bot", {"via": f"token:{token_id}", "role": "operator", "tenant": None,
                               "source": "127.0.0.1"})
    kinds = ("submit", "pause", "resume", "cancel")
    assert _principals(api, task_id, kinds) == dict.fromkeys(kinds, expected)
    # And no event holds the token or its secret
    everything = repr(sql_rows(api.database_url, "SELECT * FROM events"))
    assert token not in everything and token.split("_", 2)[2] not in everything


def test_events_of_verbs_run_at_the_shell_say_local_cli(api: Api) -> None:
    # When an operator submits and cancels at the shell (direct mode)
    task_id = api.cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor",
                             "simulate", "--in", "1h", operator="alice")
    api.cli.ok("tasks", "cancel", str(task_id), operator="alice")
    # Then the events say the name was declared at a shell that holds the credentials
    local = ("alice", {"via": "local-cli", "role": None, "tenant": None, "source": None})
    assert _principals(api, task_id, ("submit", "cancel")) == {"submit": local,
                                                               "cancel": local}
    # And so does the token_create event of a token made at the shell
    api.token("ci", "--role", "viewer")
    [created] = sql_rows(api.database_url, "SELECT operator, data FROM events "
                                           "WHERE kind = 'token_create'")
    assert (created.operator, data(created)["principal"]) == (
        "admin-at-shell", {"via": "local-cli", "role": None, "tenant": None, "source": None})
