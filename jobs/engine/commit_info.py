"""Which step, cycle and segment wrote each Delta commit.

Every Delta commit a deltacrawl step makes carries a JSON object in its commit info's
``userMetadata`` (the column of that name in ``DESCRIBE HISTORY``)::

    {"step": "update", "segment": "20261201120000-a1b2c3", "cycle": 3, "crawl_id": "20261201115900-9f8e7d"}

``cycle`` and ``crawl_id`` are set by ``deltacrawl crawl`` (jobs/crawl_cycles.py: inject is cycle 0)
and by a step given ``--crawl-id``/``--cycle`` (jobs/engine/tracking.py: the Airflow DAG's steps); a
step run on its own by hand has them null. ``segment`` is null for inject. So
"the crawldb as of the end of cycle 3" is the newest commit whose userMetadata says cycle 3
(README, "SQL on the crawl database"; ``crawldb_history`` in jobs/sql.py has these fields as
columns).

How: Delta copies the session setting ``spark.databricks.delta.commitInfo.userMetadata`` into
every commit made while it is set, whatever the API (MERGE through DeltaTable, DataFrame
writes, CREATE/ALTER TABLE). ``writes_commits(step)`` sets it around a step's ``run`` and puts
the previous value back afterwards, so a commit outside a step is never mislabelled. The
setting belongs to the SparkSession, so steps must not run concurrently in one session (they
never do: ``crawl`` runs them one after the other). Steps that make no Delta commit (fetch
writes Parquet and WARC files only) need no label.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import json
import re
from typing import Any, Callable, TypeVar

from pyspark.sql import SparkSession

from jobs.engine.errors import UserError

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

# What crawl run and cycle the steps are in: set by jobs/crawl_cycles.py at the start of each cycle, or by
# jobs/engine/tracking.record_step around a step given --crawl-id; cleared at the end.
_crawl: dict[str, Any] = {"crawl_id": None, "cycle": None}

F = TypeVar("F", bound=Callable[..., Any])


def commit_metadata(step: str | None, segment_id: str | None = None) -> dict[str, Any]:
    """The userMetadata object for a commit of ``step`` now (every key always present)."""
    return {"step": step, "segment": segment_id, "cycle": _crawl["cycle"], "crawl_id": _crawl["crawl_id"]}


def _set(spark: SparkSession, value: str | None) -> None:
    if value is None:
        spark.conf.unset(USER_METADATA_CONF)
    else:
        spark.conf.set(USER_METADATA_CONF, value)


def set_crawl_cycle(spark: SparkSession, crawl_id: str | None, cycle: int | None) -> None:
    """Called by ``deltacrawl crawl`` as each cycle starts (``None, None`` when the crawl ends).
    Commits made between steps (the cycles table's rows) are labelled with the cycle too."""
    _crawl.update(crawl_id=crawl_id, cycle=cycle)
    _set(spark, None if crawl_id is None and cycle is None else json.dumps(commit_metadata(None)))


def note_segment(spark: SparkSession, segment_id: str) -> None:
    """Inside a step: its segment became known (generate makes the id it then leases under)."""
    current = spark.conf.get(USER_METADATA_CONF, None)
    data = json.loads(current) if current else commit_metadata(None)
    data["segment"] = segment_id
    _set(spark, json.dumps(data))


def writes_commits(step: str) -> Callable[[F], F]:
    """Decorator for a step's ``run(spark, ..., segment_id=...)``: every Delta commit it makes
    says ``step``, the segment (its ``segment_id`` argument, if it has one), cycle and crawl id."""
    def decorate(run: F) -> F:
        signature = inspect.signature(run)

        @functools.wraps(run)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            spark = bound.arguments["spark"]
            previous = spark.conf.get(USER_METADATA_CONF, None)
            _set(spark, json.dumps(commit_metadata(step, bound.arguments.get("segment_id"))))
            try:
                return run(*args, **kwargs)
            finally:
                _set(spark, previous)
        return wrapper  # type: ignore[return-value]
    return decorate


CRAWL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+@/-]{0,199}")  # fullmatch (a "$" passes a trailing newline)

def run_context(args: argparse.Namespace, step: str) -> tuple[str | None, int | None]:
    """(crawl id, cycle) from a step's options, checked (both None: a step on its own)."""
    crawl_id = getattr(args, "crawl_id", None)
    cycle = getattr(args, "cycle", None)
    if crawl_id is None:
        if cycle is not None:
            raise UserError("--cycle needs --crawl-id")
        return None, None
    if not CRAWL_ID.fullmatch(crawl_id):
        raise UserError(f"invalid --crawl-id {crawl_id!r} (letters, digits and _.:+@/- only, at most 200)")
    if cycle is None and step == "inject":
        cycle = 0  # crawl.tracking.INJECT_CYCLE
    if cycle is None and not hasattr(args, "cycle"):
        return crawl_id, None  # stats: about the whole run
    if cycle is None:
        raise UserError("--crawl-id needs --cycle N")
    if cycle < 0:
        raise UserError("--cycle must be 0 or more")
    return crawl_id, cycle
