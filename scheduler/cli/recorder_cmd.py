"""``fleetsched recorder``: copy the event stream into SQL until stopped;
``fleetsched recorder status``: how far behind the record is.

Thin: connect, make sure the schema is current (``scheduler.record.migrate.ensure_schema``), run a
``scheduler.record.recorder.Recorder`` per queue shard (``scheduler.record.sharded``) that writes
notices (``scheduler.notify.Detector``), and the notification sender (``scheduler.notify.Sender``)
in a thread of its own. SIGTERM or SIGINT stops it after the batch in hand. ``status`` sums the
shards and, for a queue of several, gives each shard's figures too.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption

recorder_app = typer.Typer(
    help="Copy audit events from Redis into the SQL record (one runs in every worker too).",
    invoke_without_command=True,
)


def _open(ctx: typer.Context) -> tuple[Any, Any, Any]:
    from scheduler.cli.context import queue_client
    from scheduler.queue.shards import shards_of
    from scheduler.record.engine import engine_for
    from scheduler.record.migrate import ensure_schema

    settings = state(ctx).settings
    engine = engine_for(settings)
    try:
        ensure_schema(settings, engine)
        client = queue_client(settings)
    except BaseException:
        engine.dispose()
        raise
    return client, engine, shards_of(settings)


@recorder_app.callback()
def recorder(
    ctx: typer.Context,
    consumer: Annotated[str | None, typer.Option(help="Consumer name in the group (default: <hostname>:<pid>).")] = None,
    batch: Annotated[int, typer.Option(help="Events per SQL transaction.", min=1, max=50_000)] = 1000,
    drain: Annotated[bool, typer.Option("--drain", help="Record what is in the stream now, then exit.")] = False,
    claim_idle: Annotated[str, typer.Option(help="Take over entries a dead consumer left unacknowledged this long.")] = "60s",
) -> None:
    """Record events until SIGTERM/SIGINT (or, with --drain, until the stream is recorded)."""
    if ctx.invoked_subcommand is not None:
        return
    from scheduler.notify import Detector, Policy, Sender
    from scheduler.parse import parse_duration
    from scheduler.record.sharded import ShardRecorders

    idle_ms = int(parse_duration(claim_idle, "--claim-idle").total_seconds() * 1000)
    policy = Policy.from_settings(state(ctx).settings)
    client, engine, shards = _open(ctx)
    rec = ShardRecorders(client, engine, shards, consumer, batch=batch, claim_idle_ms=idle_ms,
                         on_batch=Detector(policy))
    streams = ", ".join(rec.streams)
    try:
        if drain:
            rec.drain()
        else:
            stop = threading.Event()
            previous = {s: signal.signal(s, lambda *_: stop.set())
                        for s in (signal.SIGTERM, signal.SIGINT)}
            output.info(f"recorder {rec.consumer}: recording {streams} (stop with Ctrl-C)")
            sender = threading.Thread(target=Sender(engine, policy).run, args=(stop,),
                                      name="notify", daemon=True)
            sender.start()
            try:
                rec.run(stop)
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
                stop.set()
                sender.join(10)
    finally:
        client.close()
        engine.dispose()
    s = rec.stats
    output.info(f"recorder {rec.consumer}: {s.events} events in {s.batches} batches "
                f"({s.inserted} new, {s.events - s.inserted} already recorded), "
                f"{s.failures} retried failures")


@recorder_app.command()
def status(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """Events waiting in Redis: not yet read, and read but not yet committed to SQL."""
    from scheduler.record.recorder import GROUP

    client, engine, shards = _open(ctx)
    try:
        per = [_stream_status(client, keys.events) for keys in shards.all]
    finally:
        client.close()
        engine.dispose()
    if len(per) == 1:
        info = {"stream": per[0]["stream"], "group": GROUP, **per[0]}
    else:  # the sums, then each shard's stream
        info = {"stream": ", ".join(p["stream"] for p in per), "group": GROUP,
                **{k: sum(p[k] for p in per) for k in ("length", "lag", "pending")},
                "consumers": max(p["consumers"] for p in per)}
        for i, p in enumerate(per):
            info[f"shard {i}"] = (f"{p['stream']}: length {p['length']}, lag {p['lag']}, "
                                  f"pending {p['pending']}, consumers {p['consumers']}")
    output.emit_object(info, fmt)


def _stream_status(client: Any, stream: str) -> dict[str, Any]:
    """Length, lag, pending and consumers of the recorders' group on one shard's stream."""
    import redis

    from scheduler.record.recorder import GROUP, backlog

    lag, pending = backlog(client, stream)
    out = {"stream": stream, "length": client.xlen(stream), "lag": lag, "pending": pending}
    consumers = []
    try:
        consumers = client.xinfo_consumers(stream, GROUP)
    except redis.ResponseError:  # no stream or group yet: nothing recorded so far
        pass
    out["consumers"] = len(consumers)
    return out
