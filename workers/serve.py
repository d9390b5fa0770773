"""Running a node as a process: connections, the recorder process, signals. ``fleetsched worker``.

0. Log to stderr through ``UrlRedactingFilter`` (children add their jobs' secrets to theirs),
   as text or JSON lines (``scheduler.logs``). Start the warm children first, before loading
   the master: they load their own modules on the other core meanwhile, so the first claim
   does not wait for them (docs/benchmarks.md, "Worker start-up"). Serve the metrics endpoint
   if ``metrics_port`` is set (``workers.metrics``).
1. Connect to Redis (``scheduler.redisdb.connect.connect``: the embedded server by default).
2. Unless disabled, make sure the SQL schema is current and the notification targets parse
   (a bad record or target stops the start before any claim), give the queue its epoch if it
   has none and refuse, in one line, a queue that lost its data (``scheduler.record.epoch``:
   the tasks SQL calls active would never run again until ``fleetsched reconcile``; a node
   refusing costs nothing yet, one claiming would hide the loss), and start a recorder consumer
   in a process of its own (``workers.recorder_process``: a thread would compete with the
   claim loop for the master's interpreter), so a single node needs nothing else started; it
   writes notices too (``scheduler.notify.detect.Detector``). Once the node can claim, the
   notification sender (``scheduler.notify.outbox.Sender``) starts in a thread of the master
   (its imports need not delay the first claim; one that fails stops the node, one line).
3. Run the node master in a thread of its own and keep the main thread for signals, from the
   start (one received while the children warm up stops the node before its first claim):
   the first SIGTERM stops claiming and lets running jobs finish within the grace period;
   a second SIGTERM, or SIGINT, gives the running jobs' leases back at once.
   (Signal handlers only set a flag; the main thread acts on it outside the handler, so no
   handler ever waits for a lock the interrupted code holds.) A node thread that dies stops
   the process with one error line.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.config import Settings
from scheduler.errors import ConfigError, FleetschedError
from scheduler.logs import configure_logging
from scheduler.redact import redact_exception
from workers.config import NodeConfig

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from workers.master import Node
    from workers.pool import Pool
    from workers.stats import NodeStats

log = logging.getLogger(__name__)


def record_engine(settings: Settings) -> Any:
    """The SQL engine of the record, its schema checked, the notification policy read: what
    must hold before the node records anything (a bad record or notify target stops the
    start, loudly)."""
    from scheduler.notify.targets import Policy  # not the package: it loads the whole record
    from scheduler.record.engine import engine_for
    from scheduler.record.migrate import ensure_schema

    Policy.from_settings(settings)
    engine = engine_for(settings)
    ensure_schema(settings, engine)
    return engine


def start_sender(settings: Settings, engine: Engine) -> tuple[threading.Thread, threading.Event]:
    """The notification sender's thread (``scheduler.notify.outbox.Sender``) and its stop."""
    from scheduler.notify import Policy, Sender

    stop = threading.Event()
    sender = Sender(engine, Policy.from_settings(settings))
    thread = threading.Thread(target=sender.run, args=(stop,), name="notify", daemon=True)
    thread.start()
    return thread, stop


def start_metrics(node: Node, settings: Settings) -> Any:
    """The node's metrics endpoint (``workers.metrics``), or None when ``metrics_port`` is 0.
    A port already taken stops the start with one line."""
    if not settings.metrics_port:
        return None
    try:
        return node.metrics.serve(settings.metrics_port, settings.metrics_address)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {settings.metrics_address}:"
                          f"{settings.metrics_port}: {exc.strerror or exc}",
                          hint="choose a free --metrics-port (or 0 for none)") from None


def boot_children(config: NodeConfig) -> Pool:
    """The node's pool with its warm children started (``workers.pool``): call it from the
    main thread (``PR_SET_PDEATHSIG``), before the master's own imports."""
    from workers.pool import Pool

    pool = Pool(config, threading.RLock())
    pool.ensure_warm()
    return pool


def serve(config: NodeConfig, on_started: Callable[[Node], None] | None = None) -> NodeStats:
    """Run a node until a signal stops it (call from the main thread)."""
    settings = config.settings
    configure_logging(settings, config.worker_id)
    pool = boot_children(config)
    recorder = sender = metrics = client = None
    try:
        from scheduler.redisdb.connect import connect
        from workers.master import Node

        client = connect(settings)
        node = Node(config, client, pool=pool)
        metrics = start_metrics(node, settings)
        engine = record_engine(settings) if config.recorder else None
        if engine is not None:
            from scheduler.record.epoch import ensure_intact
            from workers.recorder_process import RecorderProcess

            node.heartbeat.expect_epoch(ensure_intact(engine, client, node.shards))
            node.use_engine(engine)
            # Started before any claim, so a recorder that cannot start costs no job; its
            # imports run in its own process, beside the children's.
            recorder = RecorderProcess(settings, config.worker_id, on_death=node.fail)
    except BaseException:
        if recorder is not None:
            recorder.stop()
        pool.kill_all("the node did not start")
        if metrics is not None:
            metrics.shutdown()
        if client is not None:
            client.close()
        raise

    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)

    def run_node() -> None:
        try:
            node.run()
        except BaseException as exc:  # noqa: BLE001 - a node never stops silently
            node.fail(f"the node thread died: {type(exc).__name__}: {redact_exception(exc)}")
            log.exception("the node thread died")
            node.pool.kill_all("the node thread died")  # if it died before its shutdown ran

    handled = 0

    def act_on_signals() -> None:
        nonlocal handled
        while handled < len(received):
            signum = received[handled]
            handled += 1
            fast = signum == signal.SIGINT or node.stopping
            log.warning("%s: %s", signal.Signals(signum).name,
                        "giving running jobs back now" if fast else
                        f"no new jobs; running ones have {config.grace_s:g}s to finish")
            node.stop(fast=fast)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    thread = threading.Thread(target=run_node, name="node", daemon=False)
    thread.start()
    try:
        # Signals count from the start: one received while the children warm up stops the
        # node before its first claim.
        while not node.started.wait(0.1) and thread.is_alive():
            act_on_signals()
        act_on_signals()
        if node.started.is_set() and thread.is_alive() and not node.stopping:
            if engine is not None:
                # Once the node can claim: the outbox loads the ORM and the record's models
                # (about 0.1 s), which the first claim need not wait for.
                try:
                    sender = start_sender(settings, engine)
                except Exception as exc:  # noqa: BLE001 - one line, the node stops
                    node.fail(f"the notification sender did not start: "
                              f"{type(exc).__name__}: {redact_exception(exc)}")
            if on_started is not None:
                on_started(node)
        while thread.is_alive():
            thread.join(0.1)
            act_on_signals()
    finally:
        if thread.is_alive():  # an exception in this thread: still give the leases back
            node.stop(fast=True)
            thread.join()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if sender is not None:
            sender[1].set()
            sender[0].join(10)
        if recorder is not None:  # after the node: the last acks get recorded
            recorder.stop()
        if metrics is not None:
            metrics.shutdown()
        client.close()
    if node.fatal is not None:
        raise FleetschedError(f"the worker node stopped: {node.fatal}",
                              hint="fix the cause (see the log above) and start it again")
    return node.stats
