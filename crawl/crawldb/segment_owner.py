"""Who owns a segment, and whether that owner is gone: what lets `deltacrawl crawl` finish the
segments of a crawl driver that died (docs/architecture.md, "Crash safety") without taking those
of a crawl still running on the same crawl root.

The crawl driver writes an owner record (one JSON line, segments/<id>/_owner) into every segment
it generates or takes over, and rewrites it every ``stale_s / 10`` seconds while the segment is in
hand (a heartbeat: the file's modification time). The owner is gone when
- it ran on this machine (same host name and same boot id) and its process is not running any
  more: no process has its pid, or the process with that pid started at another time (a pid
  used again; Linux /proc gives the start time, in clock ticks since boot), or
- it ran on this machine before a reboot (same host name, another boot id), or
- it ran elsewhere and its record was last rewritten more than ``stale_s`` seconds ago (a
  process on another machine cannot be asked; a live one keeps its heartbeat).
The first two need no waiting: a crawl restarted on the machine where its driver was killed
picks the segments up at once. A crawl that ends without finishing a segment (it failed, or was
interrupted, in a process that lives on: a notebook's) rewrites the record as ended, and such an
owner is gone too.
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from typing import Callable


@dataclass(frozen=True)
class SegmentOwner:
    host: str  # socket.gethostname()
    boot_id: str  # /proc/sys/kernel/random/boot_id ("" where there is none)
    pid: int
    pid_start: str  # the process's start time in clock ticks since boot (/proc/<pid>/stat), or ""
    crawl_id: str  # the crawl run's id (cycles table, MLflow), for people reading the record
    ended: bool = False  # the crawl ended without finishing the segment

    def record(self) -> str:
        """The one line written to segments/<id>/_owner."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str | None) -> "SegmentOwner | None":
        """The owner a record names, or None for none or one this version cannot read (treated as
        no owner: such a segment is left to its lease)."""
        if not text:
            return None
        try:
            fields = json.loads(text)
            return cls(str(fields["host"]), str(fields["boot_id"]), int(fields["pid"]), str(fields["pid_start"]),
                       str(fields.get("crawl_id", "")), bool(fields.get("ended", False)))
        except (ValueError, TypeError, KeyError):
            return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat),
    or "" where /proc does not say (not Linux, no such process)."""
    stat = _read(f"/proc/{pid}/stat")
    # the command name (field 2) is in parentheses and may hold spaces: count after its end
    fields = stat[stat.rfind(")") + 2:].split() if ")" in stat else []
    return fields[19] if len(fields) > 19 else ""


def this_process(crawl_id: str) -> SegmentOwner:
    return SegmentOwner(socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), os.getpid(),
                        process_start(os.getpid()), crawl_id)


def pid_running(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def owner_is_gone(owner: SegmentOwner, here: SegmentOwner, heartbeat_age_s: float, stale_s: float,
                  running: Callable[[int], bool] = pid_running,
                  started: Callable[[int], str] = process_start) -> bool:
    """Whether ``owner`` (a segment's record, last rewritten ``heartbeat_age_s`` ago) is no crawl
    driver any more, as seen from ``here`` (this process's record; module docstring)."""
    if owner.ended:
        return True
    if owner.host == here.host and owner.boot_id == here.boot_id:
        if not running(owner.pid):
            return True
        # a pid used again by another process: its start time differs (unknown: assume alive)
        start = started(owner.pid)
        return bool(owner.pid_start and start and start != owner.pid_start)
    if owner.host == here.host and owner.boot_id and here.boot_id:
        return True  # this machine rebooted since: no process of before is running
    return heartbeat_age_s > stale_s
