"""``stream_guard.Rechecks``: the streams one credential holds open re-check it once per
heartbeat interval between them (ten followers cost the record one check, as
``benchmarks/bench_sse.py`` measures), and a refusal is seen by every one of them."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from scheduler.server.stream_guard import Rechecks


def test_ten_streams_of_one_token_share_one_check_per_interval() -> None:
    rechecks, calls, answer = Rechecks(), [], [True]

    def check() -> bool:
        calls.append(threading.get_ident())
        time.sleep(0.05)  # a record read: the other streams wait for it, not run their own
        return answer[0]

    with ThreadPoolExecutor(10) as pool:
        got = list(pool.map(lambda _i: rechecks.ask(("tok", "tasks.watch"), 0.5, check),
                            range(10)))
    assert got == [True] * 10 and len(calls) == 1
    # another token, or another verb, is checked on its own
    assert rechecks.ask(("other", "tasks.watch"), 0.5, check) and len(calls) == 2
    assert rechecks.ask(("tok", "tasks.output"), 0.5, check) and len(calls) == 3
    # once the interval passed, the next stream asks again and all of them see a revocation
    answer[0] = False
    assert rechecks.ask(("tok", "tasks.watch"), 0.5, check) is True  # still fresh
    time.sleep(0.55)
    with ThreadPoolExecutor(10) as pool:
        got = list(pool.map(lambda _i: rechecks.ask(("tok", "tasks.watch"), 0.5, check),
                            range(10)))
    assert got == [False] * 10 and len(calls) == 4
