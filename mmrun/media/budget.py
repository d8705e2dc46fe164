"""The decoding memory budget: what the decodes running at once may hold, shared by the
worker threads (``MMRUN_DECODE_MEMORY_MB``), and the freed memory given back to the system
after a large decode (glibc's ``malloc_trim``)."""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mmrun.media.limits import positive_number

DECODE_MEMORY_ENV = "MMRUN_DECODE_MEMORY_MB"
# What the decodes running at once may hold (file bytes, decoded pixels or samples); a decode
# that needs more than all of it runs alone.
DEFAULT_DECODE_MEMORY_MB = 512


def decode_memory() -> int:
    """The budget in bytes (MMRUN_DECODE_MEMORY_MB)."""
    return int(
        positive_number(DECODE_MEMORY_ENV, DEFAULT_DECODE_MEMORY_MB, "megabytes") * 1024 * 1024
    )


class Ticket:
    """What one resolve (or one decode called on its own) holds of the budget."""

    def __init__(self) -> None:
        self.held = 0


class MemoryBudget:
    """The bytes that the decodes running at once may hold, shared by the worker threads.

    A reservation waits until it fits beside what the others hold. One that cannot fit goes
    ahead when no other decode is running (all of them wait or hold nothing), the first to ask
    first: so nothing waits forever, and the peak is the budget or the largest single decode.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = 0
        self._running = 0  # tickets holding bytes and not waiting for more
        self._queue: deque[Ticket] = deque()

    def reserve(self, ticket: Ticket, nbytes: int) -> None:
        limit = decode_memory()
        with self._cond:
            if ticket.held:  # waiting from now on: another waiter may be next, if none runs
                self._running -= 1
                self._cond.notify_all()
            self._queue.append(ticket)
            try:
                while not (
                    self._held + nbytes <= limit
                    or (self._running == 0 and self._queue[0] is ticket)
                ):
                    self._cond.wait()
            finally:
                self._queue.remove(ticket)
                if ticket.held or nbytes:
                    self._running += 1
                self._cond.notify_all()
            self._held += nbytes
            ticket.held += nbytes

    def release(self, ticket: Ticket) -> None:
        with self._cond:
            if not ticket.held:
                return
            if ticket.held >= _TRIM_AFTER:
                _give_back_freed_memory()
            self._held -= ticket.held
            self._running -= 1
            ticket.held = 0
            self._cond.notify_all()


# Pillow allocates an image in blocks that glibc's malloc serves from the arena of the thread
# that decodes, and keeps there once freed: without this, six failed decodes of 170 MB each,
# one after the other in six threads, still held 1 GB. So after a large decode, the freed
# memory goes back to the system before the next one starts.
_TRIM_AFTER = 32 << 20


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None
    return trim


def _give_back_freed_memory() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


_budget = MemoryBudget()
_tickets = threading.local()


@contextmanager
def memory_ticket(initial: int = 0) -> Iterator[None]:
    """Hold a share of the decoding budget until the block ends; ``initial`` bytes at once.
    Inside a block that holds one already (a resolve), this thread's ticket is that one."""
    if getattr(_tickets, "current", None) is not None:
        yield
        return
    ticket = Ticket()
    _tickets.current = ticket
    try:
        if initial:
            _budget.reserve(ticket, initial)
        yield
    finally:
        _tickets.current = None
        _budget.release(ticket)


def reserve(nbytes: int) -> None:
    """Add ``nbytes`` to this thread's share of the budget, waiting for room if need be."""
    ticket: Ticket | None = getattr(_tickets, "current", None)
    if ticket is not None and nbytes > 0:
        _budget.reserve(ticket, nbytes)


def forget_locals(exc: Exception) -> Exception:
    """``exc``, without the local variables of the frames it was raised through: a failed
    decode's half-decoded image (hundreds of MB) would otherwise live as long as the error,
    which the run keeps until it ends. The traceback itself stays, for MMRUN_DEBUG."""
    import traceback

    traceback.clear_frames(exc.__traceback__)
    return exc
