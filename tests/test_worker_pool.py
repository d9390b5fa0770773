"""The pool's hand-off with a child that dies: a send at that moment fails cleanly.

Found by the child-kill fault test under load: the child's reader thread closed the connection
while the claim loop was writing to it, and the write raised TypeError, which killed the node.
"""

from __future__ import annotations

import threading
import time

from scheduler.config import Settings
from tests.worker_support import wait_until
from workers.config import NodeConfig
from workers.pool import Pool
from workers.protocol import RUN


def test_a_child_that_dies_during_a_send_is_closed_after_it_and_later_sends_say_false() -> None:
    # Given a pool with one ready child
    pool = Pool(NodeConfig(Settings(), slots=2, processes=1, worker_id="race"), threading.RLock())
    pool.attach(lambda child, outcomes: None, lambda child: None)
    pool.ensure_warm()
    [child] = pool.children
    try:
        assert pool.wait_ready(30)
        # When it dies while the master is in the middle of a send (holding the send lock)
        with child.send_lock:
            child.kill("test")
            wait_until(lambda: child.proc.returncode is not None, 15, "the reader to reap it")
            time.sleep(0.2)  # the reader goes on to close the connection
            # Then the reader waits for the send before it closes the connection
            assert not child.conn.closed
        wait_until(lambda: child.exited, 15, "the reader to finish")
        assert child.conn.closed
        # And a send after that returns False (the master releases the jobs), never raises
        assert pool.dispatch(child, []) is False
        assert child.send((RUN, [])) is False
    finally:
        pool.kill_all("test over")
