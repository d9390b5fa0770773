"""``fleetsched tenants list|set``: a customer's settings at the shell, on a real record; bad
input is one line and writes nothing; contacts are listed without their secrets."""

from __future__ import annotations

from pathlib import Path

from tests.submit_support import cli_with_inventory, sql_rows


def test_a_tenant_asks_for_approval_and_lists_its_contacts_without_secrets(
        tmp_path: Path, redis_url: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[acme]\nacme-01\n[acme:vars]\n"
                                                  "fleetsched_tenant=acme\n")
    hook = "https://hooks.example.org/services/T0/SECRET123"
    code, out, err = cli("tenants", "set", "acme", "--approval-required", "--contact", hook,
                         "--contact", "mailto:board@acme.example")
    assert code == 0, out + err
    assert "approval required" in err and "SECRET123" not in out + err
    listed = cli.ok("tenants", "list", "-o", "json")
    assert '"tenant": "acme"' in listed and '"hosts": 1' in listed
    assert "SECRET123" not in listed and "https://hooks.example.org/..." in listed
    (event,) = sql_rows(cli.database_url, "SELECT data FROM events WHERE kind = 'tenant-set'")
    assert "SECRET123" not in str(event.data)


def test_bad_tenant_settings_are_one_line_and_write_nothing(
        tmp_path: Path, redis_url: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    for args, message in (
            (["acme"], "nothing to change"),
            (["acme", "--contact", "htps://x"], "notify target"),
            (["bad name", "--approval-required"], "tenant name 'bad name'")):
        code, out, err = cli("tenants", "set", *args)
        assert code == 2, (args, out, err)
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not sql_rows(cli.database_url, "SELECT name FROM tenants")
