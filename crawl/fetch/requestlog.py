"""The request log of a segment's fetch: every request a fetch task attempt sends, written just
before it is sent, so that what a dead attempt did is known to the attempt that retries it.

Spark retries a failed task (``spark.task_max_failures``): a killed Python worker, an executor
lost. The new attempt fetches the same hosts (the job's host assignment is deterministic), and
without this log it would not know that its predecessor already contacted them. From the log it
keeps two promises:

  * politeness across attempts: a host's first request waits until the host's gap has passed
    since the last request any earlier attempt (or earlier run) sent it. The log has send times
    only, and an attempt that was killed may have had a request under way (the server sees it
    later than it was logged): such a request counts as reaching the host as late as it could,
    when the retry reads the log (at most ``fetch.total_timeout_s`` after it was sent);
  * nothing lost: a page an earlier attempt requested is requested again in this attempt, since
    its answer died with that attempt (no committed row, no indexed WARC record: the dead
    attempt's WARC files are never indexed and are removed once the fetch has committed). The
    request carries the crawldb's validators (ETag / Last-Modified, from the fetchlist), so a page
    we already held costs the server a 304. Only a page that ``MAX_LOST_REQUESTS`` earlier attempts
    requested and died with is not requested again (it may be what kills them: the task must
    end): it is reported ``not_attempted`` and stays due for the next cycle.

Each attempt appends to its own file, ``<run>-<task>-<attempt>.log``, one line per request:
``<epoch seconds>\\t<kind>\\t<host>\\t<gap seconds>\\t<url>`` (kind: robots, sitemap or page; gap:
the least time the host must have between two requests, as the attempt knew it). Lines are written
with one ``write`` call each, unbuffered: they survive a kill -9 of the process (not a crash of
the machine). A line is written before the request starts, so the log may name a request that
never reached the server; never the other way round.

``run`` is the fetch run's id (sortable by start time). Once a run has succeeded, re-running
fetch on the segment is a deliberate re-fetch: the completed runs' pages may be requested again
(their timing still counts).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from crawl.fetch.robots import RobotsAnswer, answers_of

# A page requested by this many attempts (or runs) that died is not requested again under the
# lease: two deaths with the same page under way make it a suspect, and a retry that requested it
# a third time could use up spark.task_max_failures and fail the whole fetch. One death alone
# (an executor lost, a worker killed under load) is the common case and costs one more request.
MAX_LOST_REQUESTS = 2
_NAME_RE = re.compile(r"(?P<run>[0-9A-Za-z_-]+)-(?P<task>\d{5})-(?P<attempt>\d+)\.log")  # fullmatch
KINDS = ("robots", "sitemap", "page")


@dataclass
class EarlierRequests:
    """What earlier attempts and runs sent: the last request time per host (epoch seconds), the
    largest gap they kept to the host (its delay, Crawl-delay included, which a retry only learns
    again from robots.txt), and the pages requested by attempts whose results were not committed,
    each with the number of such attempts that requested it."""
    last_at: dict[str, float] = field(default_factory=dict)
    gap_s: dict[str, float] = field(default_factory=dict)
    pages: Counter[str] = field(default_factory=Counter)
    files: int = 0
    read_at: float = field(default_factory=time.time)
    # hosts the segments fetched just before this one contacted: when their last request ended
    # (known: those segments completed), so the first request here keeps the host's gap after it
    ended_at: dict[str, float] = field(default_factory=dict)
    # their robots.txt answers, per origin (scheme), newer than the fetchlist's
    robots: dict[str, dict[str, RobotsAnswer]] = field(default_factory=dict)
    # when they read the sitemaps of hosts the fetchlist has no such time for
    sitemaps_at: dict[str, float] = field(default_factory=dict)

    def note_recent(self, contacts: "Mapping[str, Mapping[str, Any]]") -> None:
        """Add ``contacts`` ({host: {ended, gap, and the robots columns of both origins (robots_status,
        robots_txt, robots_fetched_at, robots_error, robots_scheme, robots_other: crawl.fetch.robots
        host_columns) and sitemaps_fetched_at when known}}) of the segments fetched just before
        (jobs/fetch.py recent_contacts)."""
        for host, c in contacts.items():
            if c.get("ended") is not None:
                self.ended_at[host] = max(float(c["ended"]), self.ended_at.get(host, float("-inf")))
                self.gap_s[host] = max(float(c["gap"]), self.gap_s.get(host, 0.0))
            for scheme, answer in answers_of(c).items():
                known = self.robots.setdefault(host, {})
                if scheme not in known or answer.fetched_at > known[scheme].fetched_at:
                    known[scheme] = answer
            if c.get("sitemaps_fetched_at") is not None:
                self.sitemaps_at[host] = max(float(c["sitemaps_fetched_at"]), self.sitemaps_at.get(host, float("-inf")))

    def given_up(self, url: str) -> bool:
        """Whether ``url`` is not to be requested again under this lease (``MAX_LOST_REQUESTS``)."""
        return self.pages[url] >= MAX_LOST_REQUESTS

    def last_contact(self, host: str, max_request_s: float) -> float | None:
        """The latest moment (epoch seconds) an earlier request may have reached ``host``, or None.
        The log holds send times only, and the last request may still have been under way when
        its attempt died (the server can see it later than it was logged). It ended at most
        ``max_request_s`` (the total request timeout) after it was sent, and an attempt that died
        did so before this log was read: the earlier of the two bounds it."""
        sent = self.last_at.get(host)
        ended = self.ended_at.get(host)
        bounds = ([min(self.read_at, sent + max_request_s)] if sent is not None else []) + (
            [ended] if ended is not None else [])
        return max(bounds) if bounds else None


def log_name(run: str, task: int, attempt: int) -> str:
    return f"{run}-{task:05d}-{attempt}.log"


def read_earlier(directory: str, own: str | None = None, completed_run: str | None = None) -> EarlierRequests:
    """Everything logged in ``directory`` except the file ``own``. Pages logged by runs up to
    ``completed_run`` (the last fetch run of the segment that succeeded) count for timing only.
    A torn last line (the writer died mid-write) and foreign files are ignored."""
    earlier = EarlierRequests(read_at=time.time())
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return earlier
    for name in sorted(names):
        match = _NAME_RE.fullmatch(name)
        if match is None or name == own:
            continue
        pages_count = completed_run is None or match.group("run") > completed_run
        earlier.files += 1
        try:
            with open(os.path.join(directory, name), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        file_pages: set[str] = set()
        for line in data.split(b"\n")[:-1]:  # the part after the last newline may be torn
            parts = line.decode("utf-8", "replace").split("\t", 4)
            if len(parts) != 5 or parts[1] not in KINDS:
                continue
            try:
                at, gap = float(parts[0]), float(parts[3])
            except ValueError:
                continue
            host = parts[2]
            if at > earlier.last_at.get(host, 0.0):
                earlier.last_at[host] = at
            if gap > earlier.gap_s.get(host, 0.0):
                earlier.gap_s[host] = gap
            if pages_count and parts[1] == "page":
                file_pages.add(parts[4])
        earlier.pages.update(file_pages)  # once per attempt, however often it logged the page
    return earlier


class RequestLog:
    """One task attempt's log (see the module docstring), plus what the earlier ones sent."""

    def __init__(self, directory: str, run: str, task: int, attempt: int, completed_run: str | None = None):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, log_name(run, task, attempt))
        self.earlier = read_earlier(directory, os.path.basename(self.path), completed_run)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def sent(self, kind: str, host: str, url: str, gap_s: float = 0.0) -> None:
        """Record a request about to be sent (one unbuffered write: it survives a kill -9)."""
        line = f"{time.time():.6f}\t{kind}\t{host}\t{gap_s:.3f}\t{url}\n".encode("utf-8", "surrogateescape")
        os.write(self._fd, line)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RequestLog":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def sweep_stale(parent: str, older_than_s: float, keep: str) -> int:
    """Remove the request-log folders under ``parent`` (one per segment) not written for
    ``older_than_s`` seconds, except ``keep``: for logs kept on an executor's local disk, where no
    segment expiry reaches them. Returns how many were removed."""
    removed = 0
    cutoff = time.time() - older_than_s
    try:
        entries = list(os.scandir(parent))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.name == keep or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            newest = max([entry.stat().st_mtime] + [f.stat().st_mtime for f in os.scandir(entry.path)])
        except OSError:
            continue
        if newest < cutoff:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed

