"""The guarded child processes page parsing runs in: a hostile page cannot turn into a failed
Spark task.

``ParserPool`` runs ``crawl.parse.registry.parse_document`` (the parser of the answer's media
type: ``crawl.parse.page.parse_page`` for HTML, ``crawl.parse.pdf.parse_pdf`` for PDF, or an
installed one) in child processes (``ProcessPoolExecutor``
with the forkserver start method) under an address-space limit (``RLIMIT_AS``) and a wall-clock
limit. A memory blow-up comes back as ``MemoryError``, a native crash as ``BrokenProcessPool``, a
hang as a timeout after which the workers are killed; in every case the caller gets a
``ParseResult`` whose ``error`` starts with ``"parse_error: "`` and the next call gets a fresh
pool. The fetch task itself is never at risk. ``BatchingParser`` sends pages to a pool in
batches (one round trip for many pages).

Whatever runs in a child is looked up by reference (pickle), so it must be a module-level
function of an importable module: ``parse_document`` by default, or one of the hostile test
hooks in ``crawl.devweb.parser_hooks``. As with any spawn/forkserver pool, each worker imports
the parent's ``__main__`` module, so a script that uses ParserPool needs the usual
``if __name__ == "__main__":`` guard (pytest and PySpark workers are fine).
"""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import resource
import signal
import threading
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

from crawl.parse.page import ParseOptions, ParseResult, _exc_text, _parse_error
from crawl.parse.registry import parse_document

_START_TIMEOUT_S = 60.0

# --------------------------------------------------------------------------------------------
# The process pool
# --------------------------------------------------------------------------------------------

def _child_init(memory_limit_bytes: int) -> None:
    """Runs once in each worker process: address-space cap, no core dumps, ignore ^C."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    if memory_limit_bytes:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_limit_bytes if hard == resource.RLIM_INFINITY else min(memory_limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child_ping() -> int:
    return os.getpid()


def _mp_context() -> multiprocessing.context.BaseContext:
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:  # no forkserver on this platform
        return multiprocessing.get_context("spawn")
    # Only takes effect if the forkserver is not running yet: workers are then forked with
    # selectolax, pypdf and crawl already imported, and the parent's __main__ is not preloaded.
    ctx.set_forkserver_preload(["crawl.parse.pool", "crawl.parse.pdf"])
    return ctx


def _kill_executor(executor: ProcessPoolExecutor) -> list:
    """Kill the executor's worker processes and shut it down without waiting.

    ProcessPoolExecutor cannot cancel a call that is already running, so we reach into the
    private ``_processes`` dict (pid -> multiprocessing.Process, CPython 3.8-3.13) and kill the
    workers; the executor's manager thread then sees them die, fails their futures with
    BrokenProcessPool and joins them. ``shutdown`` sets ``_processes`` to None, so the snapshot
    is taken first.
    """
    procs: list = []
    for _ in range(3):
        try:
            procs = list((getattr(executor, "_processes", None) or {}).values())
            break
        except RuntimeError:  # dict changed size during iteration (a worker was just spawned)
            continue
    for proc in procs:
        try:
            proc.kill()
        except Exception:  # cleanup: a child already gone
            pass
    try:
        executor.shutdown(wait=False, cancel_futures=True)
    except Exception:  # cleanup: the pool is being dropped anyway
        pass
    return procs


_LIVE_POOLS: "weakref.WeakSet[ParserPool]" = weakref.WeakSet()


def _close_live_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


# concurrent.futures joins its executors' workers at interpreter exit, which would wait forever
# on a worker stuck in a hostile page. threading._register_atexit (private, CPython >= 3.9) hooks
# run in reverse order of registration, so this one (registered after concurrent.futures.process
# was imported) kills our workers first.
try:
    threading._register_atexit(_close_live_pools)  # type: ignore[attr-defined]
except Exception:  # pragma: no cover - interpreter already shutting down, or not CPython
    pass


class _PoolClosed(Exception):
    pass


class ParserPool:
    """``parse_document`` in worker processes, with a memory and a time limit per page.

    The pool is started lazily (in a thread, so the event loop is not blocked while the
    forkserver and workers start) and kept across calls. At most ``workers`` calls are in a
    child at once (an asyncio semaphore; the others wait their turn without the clock
    running), so ``time_limit_s`` measures the page's own parse time. When a call times out,
    or the pool breaks, the whole pool is discarded and the next call starts a new one; calls
    that were running in the same pool when it was killed for another call's timeout are
    retried once. (A crash cannot be pinned on one call: with ``workers > 1`` every call running
    in the pool at that moment gets the parse_error.)

    ``target`` (default ``parse_document``) is what runs in the child, with the same arguments;
    it must be a module-level function of an importable module (it is pickled by reference).
    """

    def __init__(self, workers: int = 1, memory_limit_bytes: int = 512 * 2**20, time_limit_s: float = 10.0,
                 *, target: Callable[..., ParseResult] | None = None):
        if int(workers) < 1:
            raise ValueError("workers must be >= 1")
        if not float(time_limit_s) > 0:
            raise ValueError("time_limit_s must be > 0")
        self.workers = int(workers)
        self.memory_limit_bytes = int(memory_limit_bytes)
        self.time_limit_s = float(time_limit_s)
        self._target = parse_document if target is None else target
        try:
            pickle.dumps(self._target)
        except Exception as exc:
            raise TypeError(f"target must be a module-level function of an importable module: {exc}") from exc
        self._lock = threading.Lock()          # executor swap vs close() (possibly from another thread)
        self._executor: ProcessPoolExecutor | None = None
        self._gen = 0                          # bumped for every executor installed
        self._killed_for_timeout: set[int] = set()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._starting: asyncio.Task | None = None
        _LIVE_POOLS.add(self)

    # -- public API -------------------------------------------------------------------------

    async def parse(self, body: bytes, url: str, content_type_header: str | None, options: ParseOptions | int,
                    x_robots_tag: str | None = None) -> ParseResult:
        """Run the target (parse_document) in a child; on timeout kill the pool's processes and replace the pool, on MemoryError /
        BrokenProcessPool / any exception return ParseResult([], "", None, "parse_error: ...") and recreate the
        pool if broken. Never raises (except CancelledError, which is propagated after making sure the
        abandoned call cannot keep a worker busy). Safe to call concurrently from many coroutines of one
        event loop."""
        result = await self.call(self._target, body, url, content_type_header, options, x_robots_tag)
        if isinstance(result, ParseResult):
            return result
        return _parse_error(f"target returned {type(result).__name__}, not ParseResult")

    async def call(self, fn: Callable, *args) -> object:
        """Run module-level ``fn(*args)`` in a child under the same limits and recovery as parse().
        Returns fn's result, or a ParseResult whose error says what went wrong. Never raises
        (except CancelledError)."""
        try:
            if self._closed:
                return _parse_error("parser pool closed")
            async with self._slots_for_running_loop():
                return await self._run(fn, args)
        except asyncio.CancelledError:
            raise
        except _PoolClosed:
            return _parse_error("parser pool closed")
        except Exception as exc:  # recorded: the page's parse_error
            return _parse_error(f"parser pool failure: {_exc_text(exc)}")

    def close(self) -> None:
        """Kill the workers and forget the pool. Idempotent; later parse() calls return an error."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            for proc in _kill_executor(executor):
                try:
                    proc.join(timeout=2.0)
                except Exception:  # cleanup: a child that will not be joined is killed already
                    pass

    def __enter__(self) -> "ParserPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _slots_for_running_loop(self) -> asyncio.Semaphore:
        # asyncio primitives bind to one loop; a pool kept across asyncio.run() calls gets new ones.
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._slots is None:
            self._loop = loop
            self._slots = asyncio.Semaphore(self.workers)
            self._starting = None
        return self._slots

    def _new_executor(self) -> ProcessPoolExecutor:
        """Blocking (run in a thread): create the executor and wait until its workers are up."""
        executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=_mp_context(),
                                       initializer=_child_init, initargs=(self.memory_limit_bytes,))
        try:
            pings = [executor.submit(_child_ping) for _ in range(self.workers)]
            for ping in pings:
                ping.result(timeout=_START_TIMEOUT_S)
        except BaseException:
            _kill_executor(executor)
            raise
        return executor

    async def _start(self) -> None:
        try:
            executor = await asyncio.get_running_loop().run_in_executor(None, self._new_executor)
            with self._lock:
                if not self._closed:
                    self._executor, executor = executor, None
                    self._gen += 1
            if executor is not None:  # closed while starting
                _kill_executor(executor)
        finally:
            self._starting = None

    async def _ready(self) -> tuple[ProcessPoolExecutor, int]:
        while True:
            if self._closed:
                raise _PoolClosed()
            executor, gen = self._executor, self._gen
            if executor is not None:
                return executor, gen
            if self._starting is None:
                self._starting = asyncio.ensure_future(self._start())
            await asyncio.shield(self._starting)

    def _discard(self, gen: int, killed_for_timeout: bool) -> None:
        """Throw away generation ``gen`` of the executor (no-op if already replaced)."""
        with self._lock:
            if gen != self._gen or self._executor is None:
                return
            executor, self._executor = self._executor, None
            if killed_for_timeout:
                self._killed_for_timeout.add(gen)
        _kill_executor(executor)

    async def _run(self, fn: Callable, args: tuple) -> object:
        for attempt in (1, 2):
            executor, gen = await self._ready()
            try:
                cfut: Future = executor.submit(fn, *args)
            except Exception as exc:  # broken or shut down under us: use a new pool once
                self._discard(gen, killed_for_timeout=False)
                if attempt == 1:
                    continue
                return _parse_error(f"could not submit: {_exc_text(exc)}")
            afut = asyncio.wrap_future(cfut)
            try:
                done, _ = await asyncio.wait({afut}, timeout=self.time_limit_s)
            except asyncio.CancelledError:
                # Nobody will wait for this call any more; if it already runs, it could run forever.
                if not cfut.cancel() and not cfut.done():
                    self._discard(gen, killed_for_timeout=True)
                raise
            if not done:
                self._discard(gen, killed_for_timeout=True)
                afut.cancel()
                return _parse_error(f"timeout after {self.time_limit_s:g}s")
            exc = afut.exception()
            if exc is None:
                return afut.result()
            if isinstance(exc, MemoryError):
                return _parse_error("memory limit exceeded (MemoryError)")
            if isinstance(exc, BrokenProcessPool):
                innocent = gen in self._killed_for_timeout
                self._discard(gen, killed_for_timeout=False)
                if innocent and attempt == 1:
                    continue  # killed because another page in the same pool timed out
                return _parse_error("worker process died (BrokenProcessPool)")
            return _parse_error(_exc_text(exc))
        return _parse_error("worker process died (BrokenProcessPool)")


# --------------------------------------------------------------------------------------------
# Batching: many pages per round trip to the child
# --------------------------------------------------------------------------------------------

def parse_batch(items: list[tuple]) -> list[ParseResult]:
    """Runs in a child: parse_document over a batch of pages (one round trip for many pages)."""
    return [parse_document(*item) for item in items]


class BatchingParser:
    """Sends pages to a ParserPool in batches, so the per-page cost of crossing to the child
    (pickling, a pipe round trip, waking the pool's threads) is paid once per batch.

    Batches form by themselves: while one batch is in the child, the pages that arrive wait and
    go together as the next one (at most ``max_batch`` pages or ``max_batch_bytes`` bytes; a
    bigger page goes alone). If a batch fails (timeout, memory, crash), its pages are parsed
    again one by one, so only the hostile page ends in parse_error.
    """

    def __init__(self, pool: ParserPool, max_batch: int = 64, max_batch_bytes: int = 8 * 2**20,
                 batch_target: Callable = parse_batch, single_target: Callable | None = None):
        self.pool = pool
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self.batch_target = batch_target
        self.single_target = single_target
        self._queue: list[tuple[tuple, asyncio.Future]] = []
        self._running: asyncio.Task | None = None

    async def parse(self, body: bytes, url: str, content_type_header: str | None, options: ParseOptions | int,
                    x_robots_tag: str | None = None) -> ParseResult:
        future = asyncio.get_running_loop().create_future()
        self._queue.append(((body, url, content_type_header, options, x_robots_tag), future))
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._drain())
        return await future

    async def call(self, fn: Callable, *args) -> object:
        """Run another module-level function (e.g. crawl.parse.sitemaps.parse_sitemap) in the same guarded child."""
        return await self.pool.call(fn, *args)

    def _take_batch(self) -> list[tuple[tuple, asyncio.Future]]:
        batch, size = [], 0
        while self._queue and len(batch) < self.max_batch:
            args, future = self._queue[0]
            if future.done():  # the caller gave up (cancelled)
                self._queue.pop(0)
                continue
            if batch and size + len(args[0]) > self.max_batch_bytes:
                break
            batch.append(self._queue.pop(0))
            size += len(args[0])
        return batch

    async def _single(self, args: tuple) -> ParseResult:
        if self.single_target is None:
            return await self.pool.parse(*args)
        result = await self.pool.call(self.single_target, *args)
        return result if isinstance(result, ParseResult) else _parse_error("bad result")

    async def _drain(self) -> None:
        while self._queue:
            batch = self._take_batch()
            if not batch:
                continue
            items = [args for args, _ in batch]
            try:
                results = await self.pool.call(self.batch_target, items) if len(items) > 1 else None
                if not (isinstance(results, list) and len(results) == len(items)):
                    # one page alone, or the batch failed: parse page by page to pin the culprit
                    results = [await self._single(args) for args in items]
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never leave a caller waiting forever
                results = [_parse_error(f"parser failure: {_exc_text(exc)}")] * len(items)
            for (_, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)

    def close(self) -> None:
        for _, future in self._queue:
            if not future.done():
                future.set_result(_parse_error("parser closed"))
        self._queue.clear()
        self.pool.close()

    def __enter__(self) -> "BatchingParser":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
