"""``fleetsched hosts import|export|list|show|add|remove|history|check``: the fleet's hosts.

Thin commands: the changes (import, add, remove, check) and the reads (list, show, history,
export) are verbs of ``scheduler.verbs.inventory``; each renders through
``scheduler.cli.output`` (data on stdout, messages on stderr); ``export`` writes the stored
inventory back out as an Ansible inventory (``scheduler.inventory.export``). A bad inventory file is one line
``file:line:col: problem`` and exit code 2, with nothing written. ``check`` probes the selected
hosts over SSH (``scheduler.health.hostcheck``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption
from scheduler.errors import ValidationError

hosts_app = typer.Typer(help="The fleet's hosts: import an Ansible inventory, list, add, remove, check SSH.",
                        no_args_is_help=True)

LIST_COLUMNS = ["name", "address", "port", "user", "groups", "tenant", "source"]


@hosts_app.command("import")
def import_cmd(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="ansible-inventory --list JSON, INI or YAML file")],
    prune: Annotated[bool, typer.Option(
        "--prune", help="remove hosts and groups this file imported before and no longer has")
    ] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print what would change and write nothing")] = False,
    fmt_in: Annotated[str | None, typer.Option(
        "--format", help="json, ini or yaml (default: by extension, then by content)")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Add and update hosts and groups from an Ansible inventory, matched by name."""
    from scheduler.inventory import FORMATS

    if fmt_in is not None and fmt_in not in FORMATS:
        raise ValidationError(f"--format {fmt_in!r} is not one of {', '.join(FORMATS)}")
    inventory, stores, principal = verbs(ctx, "inventory")
    done = inventory.import_hosts(stores, principal, path, fmt=fmt_in, prune=prune,
                                  dry_run=dry_run)
    _notes(done.notes)
    skipped = done.skipped_secrets
    if skipped:
        output.info(f"warning: skipped {len(skipped)} secret variable(s) "
                    f"({', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''}): "
                    "fleetsched never stores secrets")
    if fmt is output.OutputFormat.json:
        output.emit_object(done.as_dict(), fmt)
    elif done.changes:
        output.emit_rows(done.changes, ["change", "host", "details"], fmt)
    c = done.counts
    output.info(
        f"{'dry run, nothing written: would import' if dry_run else 'imported'} {done.path} "
        f"({done.format}): {c['added']} added, {c['updated']} updated, {c['removed']} removed, "
        f"{c['unchanged']} unchanged"
        + (f", {c['left']} left the source (kept)" if c["left"] else "")
        + f"; groups: {c['groups_added']} added, {c['groups_updated']} updated, "
          f"{c['groups_removed']} removed"
        + ("; tenants: " + ", ".join(f"{t} {n} host(s)" for t, n in sorted(done.tenants.items()))
           if done.tenants else ""))


EXPORT_EPILOG = """Examples:

  fleetsched hosts export

  fleetsched hosts export --format yaml group:web

  fleetsched hosts export --format ansible-json --out fleet.json

  fleetsched hosts export 'group:prod,!web-07' --out prod.ini

An exported file imports back to the same hosts and groups (`fleetsched hosts import
fleet.json`), and Ansible reads it: `ansible-inventory -i prod.ini --list`. The ansible-json
shape is what an inventory script prints. No secret is written (see docs/guides/inventory.md).
"""


@hosts_app.command("export", epilog=EXPORT_EPILOG)
def export_cmd(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(
        help="Hosts: group:NAME, host names, globs, vars.KEY=VALUE, &intersections, !exclusions, all (as for submit).")] = "all",
    fmt_out: Annotated[str, typer.Option(
        "--format", "-f", help="ansible-json, ini or yaml.")] = "ini",
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Write the stored hosts, groups and variables as an Ansible inventory, with
    ansible_host, ansible_port and ansible_user: what `hosts import` and Ansible read."""
    from scheduler.inventory import EXPORT_FORMATS, render_export

    if fmt_out not in EXPORT_FORMATS:
        raise ValidationError(f"--format {fmt_out!r} is not one of {', '.join(EXPORT_FORMATS)}")
    inventory, stores, _principal = verbs(ctx, "inventory")
    export = inventory.export_hosts(stores, target)
    text = render_export(export, fmt_out)
    counted = f"{len(export.hosts)} host(s), {len(export.groups)} group(s)"
    if out is None:
        output.emit_text(text)
        output.info(f"exported {counted} ({fmt_out})")
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise ValidationError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    output.info(f"exported {counted} to {out} ({fmt_out})")


@hosts_app.command("list")
def list_cmd(
    ctx: typer.Context,
    group: Annotated[str | None, typer.Option(
        "--group", "-g", help="only hosts of this group (child groups included)")] = None,
    match: Annotated[str | None, typer.Option(
        "--match", "-m", help="only host names matching this pattern, e.g. 'web-*'")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """List hosts, sorted by name."""
    inventory, stores, _principal = verbs(ctx, "inventory")
    rows = inventory.list_hosts(stores, group=group, match=match)
    if fmt is output.OutputFormat.json:
        output.emit_rows(rows, LIST_COLUMNS + ["vars"], fmt)
        return
    flat = [{**r, "groups": ",".join(r["groups"])} for r in rows]
    output.emit_rows(flat, LIST_COLUMNS, fmt)
    if fmt is output.OutputFormat.table:
        output.info(f"{len(rows)} host(s)")


@hosts_app.command("show")
def show_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the host's name")],
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Show one host: address, port, user, groups, variables, source."""
    inventory, stores, _principal = verbs(ctx, "inventory")
    row = inventory.show_host(stores, name)
    if fmt is output.OutputFormat.table:
        row = {k: (", ".join(v) if k in ("groups", "all_groups") else
                   json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
               for k, v in row.items()}
    output.emit_object(row, fmt)


def _notes(lines: list[str]) -> None:
    for line in lines:
        output.info(line)


def _parse_vars(items: list[str]) -> dict[str, Any]:
    from scheduler.inventory.ini_format import parse_value

    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValidationError(f"--var {item!r} is not KEY=VALUE")
        out[key] = parse_value(value)
    return out


@hosts_app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the host's name (letters, digits, . _ -)")],
    address: Annotated[str | None, typer.Option(
        "--address", "-a", help="host name or IP to connect to (default: NAME)")] = None,
    port: Annotated[int | None, typer.Option("--port", "-p", help="SSH port (default 22)")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="SSH login")] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", "-g", help="a group to put it in (repeatable; created if new)")] = None,
    var: Annotated[list[str] | None, typer.Option(
        "--var", help="KEY=VALUE host variable (repeatable)")] = None,
) -> None:
    """Add one host by hand (an import never prunes it)."""
    host_vars = _parse_vars(var or [])
    inventory, stores, principal = verbs(ctx, "inventory")
    done = inventory.add_host(stores, principal, name, address=address, port=port, user=user,
                              groups=group or [], host_vars=host_vars)
    _notes(done.notes)
    created = done.created
    if created:
        output.info(f"created group(s) {', '.join(created)}")
    output.info(f"added host {name}")


@hosts_app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the host's name")],
) -> None:
    """Remove one host and its group memberships, and its connection data in Redis (a job of
    it still queued then fails at its claim: the host is unknown; a warning counts them)."""
    inventory, stores, principal = verbs(ctx, "inventory")
    _notes(inventory.remove_host(stores, principal, name).notes)
    output.info(f"removed host {name}")


HISTORY_EPILOG = """Examples:

  fleetsched hosts history web-07

  fleetsched hosts history web-07 --limit 50 --output csv
"""


@hosts_app.command("history", epilog=HISTORY_EPILOG)
def history(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The host's name.")],
    limit: Annotated[int, typer.Option(help="At most this many events (the newest).", min=1, max=1_000_000)] = 1000,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Every recorded event of one host, oldest first: jobs claimed, finished, failed, deferred."""
    from scheduler.reports import TRAIL_COLUMNS

    inventory, stores, _principal = verbs(ctx, "inventory")
    rows = inventory.host_history(stores, name, limit=limit)
    columns = [c for c in TRAIL_COLUMNS if c != "host"]
    if fmt is output.OutputFormat.table:
        from scheduler.reports.trail import for_table

        shown, columns = for_table(rows, columns)
        output.emit_rows(shown, columns, fmt)
        output.info(f"{len(rows)} event(s) for {name}")
        return
    output.emit_rows(rows, columns, fmt)


CHECK_EPILOG = """Examples:

  fleetsched hosts check

  fleetsched hosts check 'group:web,!web-07' --concurrency 50 --timeout 5s

  fleetsched hosts check db-01 --become-user postgres

  fleetsched hosts check group:edge --output json

Exit codes: 0 every host ok, 3 some host failed the check, 2 bad input, 4 the target matches
no host.
"""

CHECK_COLUMNS = ["host", "address", "reachable", "host_key", "auth", "remote_user", "files",
                 "latency_ms"]


def _check_row(p: Any) -> dict[str, Any]:
    where = p.address if ":" not in p.address else f"[{p.address}]"
    key = p.host_key + (f" {p.fingerprint}" if p.host_key in ("UNKNOWN", "MISMATCH",
                                                               "REVOKED") else "")
    user = p.remote_user + (f" -> {p.become}" if p.become else "")
    via = " -> ".join(hop.split(" (")[0] for hop in p.via.split(" -> ")) if p.via else ""
    return {"host": p.host, "address": f"{where}:{p.port}" + (f" via {via}" if via else ""),
            "reachable": "yes" if p.reachable else "no", "host_key": key or "-",
            "auth": p.auth or "-", "remote_user": user or "-", "files": p.files or "-",
            "latency_ms": "-" if p.latency_ms is None else f"{p.latency_ms:.0f}"}


@hosts_app.command("check", epilog=CHECK_EPILOG)
def check_cmd(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(
        help="Hosts: group:NAME, host names, globs, vars.KEY=VALUE, &intersections, !exclusions, all (as for submit).")] = "all",
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", min=1, max=1000, help="Hosts checked at once.")] = 20,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="Per host: connect, handshake, login, and each command.")] = "10s",
    become_user: Annotated[str | None, typer.Option(
        "--become-user", help="Also check sudo -n -u USER on each host (as become would).")
    ] = None,
    executor_option: Annotated[list[str] | None, typer.Option(
        "--executor-option", help="ssh executor option NAME=VALUE (repeatable), e.g. "
                                  "identity_file=/etc/fleetsched/id_ed25519.")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Check SSH to each host as the workers would (like ansible -m ping): reachable, host key
    known and matching, login, the remote user, and how files get there (SFTP, or the shell
    where the host sets fleetsched_files=shell). Strict: never adds a host key."""
    from scheduler.health.hostcheck import SUMMARY_WORDS
    from scheduler.parse import parse_duration

    per_host = parse_duration(timeout, "--timeout").total_seconds()
    options: dict[str, Any] = {}
    for item in executor_option or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValidationError(f"--executor-option {item!r} is not NAME=VALUE",
                                  hint="e.g. --executor-option identity_file=/path/to/key")
        options[key.strip()] = value
    inventory, stores, _principal = verbs(ctx, "inventory")
    done = inventory.check_hosts(stores, target, options=options, concurrency=concurrency,
                                 timeout_s=per_host, become_user=become_user, note=output.info)
    probes, counts = done.probes, done.counts
    if fmt is output.OutputFormat.json:
        output.emit_object({"target": target, "known_hosts": done.known_hosts,
                            "hosts": [p.as_dict() for p in probes], "summary": counts,
                            "ok": counts["ok"] == len(probes)}, fmt)
    elif fmt is output.OutputFormat.csv:
        output.emit_rows([p.as_dict() for p in probes], list(probes[0].as_dict()), fmt)
    else:
        output.emit_rows([_check_row(p) for p in probes], CHECK_COLUMNS, fmt)
    for p in probes:
        if p.status != "ok":
            output.info(f"{p.host}: {p.status}: {p.error}")
            if p.hint:
                output.info(f"  hint: {p.hint}")
    output.info(f"{len(probes)} host(s): " + ", ".join(
        f"{n} {SUMMARY_WORDS[s]}" for s, n in counts.items() if n or s in (
            "ok", "unreachable", "unknown-key", "key-mismatch", "auth-failed")))
    if counts["ok"] != len(probes):
        raise typer.Exit(3)
