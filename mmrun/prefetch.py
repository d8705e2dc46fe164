"""The media of a stream of prompts, fetched and decoded by worker threads a bounded window
ahead of the engine, handed out in input order as each prompt's media are ready."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from mmrun.errors import DownloadError, MediaError, MmrunError
from mmrun.item import Item
from mmrun.media import MediaItem, MediaResolver, decoded_bytes
from mmrun.media.download import DOWNLOAD_WORKERS
from mmrun.outcome import ItemError


def _no_problem(_: Any) -> str | None:
    return None


@dataclass(frozen=True)
class ItemChecks:
    """What the model refuses of a prompt: ``count(item)`` before its media are fetched (how
    many it carries), ``media(decoded)`` once they are decoded (a clip too long); each gives
    the problem or None. ``max_count``: the most media items a prompt carries."""

    count: Callable[[Item], str | None] = _no_problem
    media: Callable[[Sequence[MediaItem]], str | None] = _no_problem
    max_count: int = 1


@dataclass
class Ready:
    item: Item
    media: list[MediaItem] | None
    error: ItemError | None


_END: Any = object()


class MediaPipeline:
    """The media of a stream of items, resolved by worker threads at most ``ahead`` items in
    front of the consumer, handed out in input order. A source repeated in nearby items is
    resolved once."""

    def __init__(
        self,
        items: Iterator[Item | None],
        resolver: MediaResolver,
        ahead: int,
        known: Mapping[str, Future[MediaItem]] | None = None,
        budget: int | None = None,
        checks: ItemChecks | None = None,
        in_order: bool = False,
    ) -> None:
        """``budget``: bytes the decoded media held ahead may take (a batch); None: no bound
        but ``ahead`` (a named run needs every item anyway). ``checks``: what the model
        refuses of an item before and after its media are decoded. ``in_order``: hand out
        items strictly in input order (a dry run, whose lines are read as the plan), not the
        first one ready."""
        self._checks = checks or ItemChecks()
        self._in_order = in_order
        self._items = items
        self._resolver = resolver
        self._ahead = max(1, ahead)
        self._queue: collections.deque[tuple[Item, list[Future[MediaItem]] | ItemError]] = (
            collections.deque()
        )
        # source text -> its resolution, for the sources of nearby items (all, for a named run)
        self.resolved: collections.OrderedDict[str, Future[MediaItem]] = collections.OrderedDict(
            known or {}
        )
        self._per_item = max(1, self._checks.max_count)
        self._capacity = 2 * self._ahead * self._per_item
        # What the decoded media held ahead may take (MMRUN_PREFETCH_MB): once the first items
        # are decoded, their size bounds how many are resolved ahead, with PACED_MEDIA (a
        # few long videos can hold gigabytes of frames). None: ``ahead`` alone.
        self._budget = budget
        self._seen_bytes = 0
        self._seen_items = 0
        self._seen_media = 0
        self._exhausted = False
        # Items handed out and given back (their engine died): handed out again first.
        self._back: collections.deque[Ready] = collections.deque()
        # Every resolution started, while ``keep_futures`` (a batch stops keeping them once
        # the engine has started: they hold decoded media).
        self.futures: list[Future[MediaItem]] = []
        self.keep_futures = True

    def fill(self) -> None:
        """Submit items until ``ahead`` are waiting. The item stream may yield None: nothing
        right now, more may come (a replica waiting on its coordinator)."""
        while not self._exhausted and len(self._queue) < self._limit():
            item = next(self._items, _END)
            if item is _END:
                self._exhausted = True
                return
            if item is None:
                return
            problem = item.problem or self._checks.count(item)
            if problem is not None:
                self._queue.append((item, ItemError("request", problem)))
                continue
            try:
                futures = [self._submit(source) for source in item.sources]
            except MmrunError as exc:  # a source that cannot be fetched at all (bad scheme)
                self._queue.append((item, ItemError("media", str(exc), exc)))
                continue
            self._queue.append((item, futures))

    def _limit(self) -> int:
        """How many items may wait ahead: ``ahead``; with a prefetch budget (a batch), fewer:
        within the budget (estimated from the items decoded so far) and, once sizes are
        known, no more than keeps every resolver thread busy (``PACED_MEDIA``)."""
        if self._budget is None:
            return self._ahead
        seen_items, seen_bytes, seen_media = self._seen_items, self._seen_bytes, self._seen_media
        if not seen_items:  # none handed out yet (the engine is starting): those decoded
            for _, work in self._queue:
                if isinstance(work, list) and work and all(_decoded(f) for f in work):
                    seen_items += 1
                    seen_bytes += sum(decoded_bytes(f.result()) for f in work)
                    seen_media += len(work)
        if not seen_items:  # no size known yet: a few, not a GPU's whole window
            return min(self._ahead, UNSIZED_AHEAD)
        per_item = seen_bytes / seen_items
        paced = math.ceil(PACED_MEDIA / max(seen_media / seen_items, 1))
        return max(2, min(self._ahead, int(self._budget / max(per_item, 1)), paced))

    def _submit(self, source: str) -> Future[MediaItem]:
        future = self.resolved.get(source)
        if future is None or future.cancelled():
            (future,) = self._resolver.submit([source])
            self.resolved[source] = future
            if self.keep_futures:
                self.futures.append(future)
            while len(self.resolved) > min(self._capacity, 2 * self._limit() * self._per_item):
                self.resolved.popitem(last=False)
        else:
            self.resolved.move_to_end(source)
        return future

    def peek(self) -> Item | None:
        """The first item waiting, if any (safe beside ``fill`` in another thread)."""
        with contextlib.suppress(IndexError):
            return self._queue[0][0]
        return None

    def media_of(self, item: Item) -> list[MediaItem]:
        """The resolved media of an item whose sources this pipeline has submitted."""
        return [self.resolved[source].result() for source in item.sources]

    def first_error(self) -> ItemError | None:
        """The first item refused before any resolution started (a malformed source)."""
        return next((work for _, work in self._queue if isinstance(work, ItemError)), None)

    def idle(self) -> None:
        """Nothing in flight and nothing ready: wait a moment for the item stream (a
        replica's coordinator) instead of asking again at once."""
        wait = getattr(self._items, "wait", None)
        if wait is not None:
            wait(0.2)

    def done(self) -> bool:
        self.fill()
        return self._exhausted and not self._queue and not self._back

    def put_back(self, ready: list[Ready]) -> None:
        """Items handed out that must run again (their engine died), in this order, ahead of
        every other item."""
        self._back.extendleft(reversed(ready))

    def next(self, block: bool) -> Ready | None:
        """The first item (in input order) whose media are all resolved or failed; None if
        none is, unless ``block``, or if none is left. An item waiting on a slow download
        does not hold up the ready ones behind it, unless items go ``in_order``."""
        if self._back:
            return self._back.popleft()
        looked_at = 1 if self._in_order else None  # how many of the queue's first items
        while True:
            self.fill()
            if not self._queue:
                return None
            for index, (item, work) in enumerate(itertools.islice(self._queue, looked_at)):
                if isinstance(work, ItemError) or all(f.done() for f in work):
                    del self._queue[index]
                    self.fill()
                    return self._ready(item, work)
            if not block:
                return None
            waiting = [
                f
                for _, work in itertools.islice(self._queue, looked_at)
                if isinstance(work, list)
                for f in work
            ]
            concurrent.futures.wait(waiting, return_when=concurrent.futures.FIRST_COMPLETED)

    def _ready(self, item: Item, work: list[Future[MediaItem]] | ItemError) -> Ready:
        if isinstance(work, ItemError):
            return Ready(item, None, work)
        try:
            media = [f.result() for f in work]
        except (MediaError, DownloadError) as exc:
            return Ready(item, None, ItemError("media", str(exc), exc))
        self._seen_items += 1
        self._seen_bytes += sum(decoded_bytes(m) for m in media)
        self._seen_media += len(media)
        problem = self._checks.media(media)
        if problem is not None:
            return Ready(item, None, ItemError("media", problem))
        return Ready(item, media, None)


UNSIZED_AHEAD = 32  # items resolved ahead before any has been decoded
# Media resolved ahead of the engine once sizes are known: as many as the resolver has threads
# (DOWNLOAD_WORKERS), so downloads still overlap, and no more. Decoding far ahead ran in bursts
# beside the GIL-bound work of this process (vLLM's imports while the engine starts, building
# requests once it is ready) and slowed both (docs/performance.md, "Where the start goes").
PACED_MEDIA = DOWNLOAD_WORKERS


def _decoded(future: Future[MediaItem]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None
