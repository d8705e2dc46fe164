"""The daemon worker pool that fetches and decodes media."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    """Runs jobs on at most ``workers`` daemon threads, started as jobs come and ended after
    ``IDLE_S`` without one.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so after Ctrl-C
    during a stalled download the process would hang until the download's timeout. Not a
    thread per job either: starting 256 threads (a 64 x 4-image run) took 0.7 s before the
    engine could start, on 2 busy cores. Only jobs not yet started are remembered: a batch's
    decoded media are not kept alive here.
    """

    IDLE_S = 5.0

    def __init__(self, workers: int, name: str) -> None:
        self._workers = max(1, workers)
        self._name = name
        self._jobs: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._threads = 0
        self._idle = 0
        self._started = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._wake:
            self._jobs.append((future, fn, args))
            if self._idle > len(self._jobs) - 1:
                self._wake.notify()
            elif self._threads < self._workers:
                self._threads += 1
                self._started += 1
                name = f"{self._name}-{self._started}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._jobs:
                    self._idle += 1
                    woken = self._wake.wait(self.IDLE_S)
                    self._idle -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                future, fn, args = self._jobs.popleft()
                # marked running under the lock: shutdown() cancels exactly what is queued
                running = future.set_running_or_notify_cancel()  # False: cancelled
            if running:
                try:
                    result = fn(*args)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args  # nothing of a finished job kept while idle

    def shutdown(self) -> None:
        """Cancel the jobs not started; running ones are left to end (or die with the process)."""
        with self._wake:
            queued = [future for future, _, _ in self._jobs]
        for future in queued:
            future.cancel()
