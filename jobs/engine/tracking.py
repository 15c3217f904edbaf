"""What a crawl records about itself: per-step figures, the ``cycles`` Delta table, the MLflow run.

Every step run gives a crawl.tracking.StepFigures: the step's own result (the dataclass its
``run`` returns) plus, for fetch, one aggregation over the segment's fetched rows (bytes, fetch
latency, the politeness bound) and, for update, the crawldb's URLs per status. Those figures are
the one source of both records:

- the ``cycles`` table (<crawl_root>/cycles, docs/crawldb.md): one row per step run, appended —
  by ``deltacrawl crawl`` after each cycle (cycle number, crawl id, MLflow run id) and by each
  step run on its own (cycle and crawl id null, unless given: see below);
- the MLflow run of a ``deltacrawl crawl`` (CrawlTracker): params = the effective config,
  metrics per cycle with step = cycle number, and at the end the stats summary, the per-step
  figures and the config as JSON, and PNG charts (crawl/charts.py).

Steps run one by one (by Airflow: airflow_dags/deltacrawl_cycle.py) make one crawl run together
when each is given ``--crawl-id ID`` and ``--cycle N``: each step finds the MLflow run tagged with
that crawl id (the first one creates it, with the config as params), logs its own metrics with
step = N, and labels its cycles row and Delta commits with the crawl id and cycle; update also
logs the cycle's total seconds. ``stats --crawl-id ID`` ends the run as ``crawl`` does: the
artifacts, rebuilt from the cycles table, and FINISHED. A step that fails marks the run FAILED,
and its retry marks it RUNNING again.

Bookkeeping never fails a crawl: if the table append, a figure query or the tracking store
fails, one line goes to stderr (once per kind) and the crawl goes on without it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.tracking import (CYCLE_STEPS, StepFigures, TrackingStore, config_document, config_params,
                            cycle_metrics, cycle_row, figures_document, tracking_store)
from jobs.engine.commit_info import USER_METADATA_CONF, commit_metadata, run_context, set_crawl_cycle
from jobs.engine.logs import log_step, step_logger
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.schemas import CYCLES_SCHEMA
from jobs.engine.tables import ensure_cycles_table, table_version
from jobs.engine.writes import TXN_APP_ID, TXN_VERSION

# MLflow limits per log_batch request (mlflow.utils.validation): 1000 metrics, 100 params.
_METRICS_PER_BATCH, _PARAMS_PER_BATCH = 1000, 100
_MAX_TAG_CHARS = 5000


def new_crawl_id(now: float | None = None) -> str:
    """Like a segment id (sortable by time, unique): names one `deltacrawl crawl` run."""
    now = time.time() if now is None else now
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


class OneLineWarnings:
    """Bookkeeping failures: one stderr line per kind, however often it fails."""

    def __init__(self, prog: str):
        self.prog = prog
        self.seen: set[str] = set()

    def __call__(self, kind: str, exc: BaseException, consequence: str) -> None:
        if kind in self.seen:
            return
        self.seen.add(kind)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        step_logger(self.prog.split()[-1]).warning("%s failed (%s: %s); %s", kind, type(exc).__name__, first,
                                                   consequence)


# ---------------------------------------------------------------------------------------------
# figures


def fetch_figures(spark: SparkSession, root: CrawlRoot, segment_id: str) -> dict[str, Any]:
    """One pass over segments/<id>/fetched: bytes read, requests per log2 latency bucket, the
    politeness bound (max over hosts of (requests - 1) x the host's minimum gap), and the URLs
    answered per media type (the fetcher's content_type: the header's type/subtype, or what
    sniffing found where it was missing or generic; lower case, no parameters)."""
    fetched = spark.read.parquet(root.fetched(segment_id))
    is_url = F.col("kind") == "url"
    bucket = F.when(is_url & F.col("elapsed_ms").isNotNull(),
                    F.floor(F.log2(F.greatest(F.col("elapsed_ms"), F.lit(1)))).cast("int"))
    bound = F.when(~is_url & (F.col("requests") > 1), (F.col("requests") - 1) * F.col("min_delay_s"))
    media = F.when(is_url, F.lower(F.trim(F.split(F.col("content_type"), ";").getItem(0))))
    rows = (fetched.groupBy(is_url.alias("is_url"), bucket.alias("bucket"), media.alias("media"))
            .agg(F.sum(F.when(is_url, F.col("content_length"))).alias("bytes"), F.count("*").alias("n"),
                 F.max(bound).alias("bound")).collect())
    latency: dict[int, int] = {}
    by_type: dict[str, int] = {}
    for r in rows:
        if r["is_url"] and r["bucket"] is not None:
            latency[r["bucket"]] = latency.get(r["bucket"], 0) + r["n"]
        if r["is_url"] and r["media"]:
            by_type[r["media"]] = by_type.get(r["media"], 0) + r["n"]
    return {"bytes": sum(r["bytes"] or 0 for r in rows if r["is_url"]), "latency_ms": latency,
            "politeness_bound_s": max((r["bound"] for r in rows if r["bound"] is not None), default=None),
            "by_content_type": by_type}


def crawldb_by_status(spark: SparkSession, root: CrawlRoot, version: int | None = None) -> dict[str, int]:
    """URLs per status in the crawldb (as of ``version``, if given)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return {r["status"]: r["n"] for r in
            reader.load(root.crawldb).groupBy("status").agg(F.count("*").alias("n")).collect()}


def result_figures(step: str, result: Any, started_at: float, seconds: float) -> StepFigures:
    """The figures of one step run from what its ``run`` returned (InjectResult, GenerateResult,
    FetchResult, DedupResult or UpdateResult): no query."""
    fig = StepFigures(step, started_at, seconds, segment_id=getattr(result, "segment_id", None))
    if step == "inject":
        fig.urls, fig.new_urls = result.valid, result.inserted
    elif step == "generate":
        fig.urls, fig.hosts = result.urls, result.hosts
    elif step == "fetch":
        fig.urls, fig.hosts, fig.by_outcome = result.urls, result.hosts, dict(result.by_fetch_status)
        fig.blocked = dict(result.blocked)
        fig.robots_errors = result.robots_errors
        fig.sitemap_errors = result.sitemap_errors
        fig.dns_errors, fig.tls_errors, fig.dns_queries = result.dns_errors, result.tls_errors, result.dns_queries
    elif step == "dedup":
        fig.urls, fig.duplicates = result.pages, result.exact + result.near
    elif step == "update":
        fig.urls, fig.new_urls, fig.hosts = result.updated, result.new_urls, result.hosts
    return fig


def add_query_figures(spark: SparkSession, root: CrawlRoot, fig: StepFigures, crawldb_version: int | None = None) -> None:
    """fetch's and update's figures that take a query: the fetch figures of its segment, and the
    crawldb's URLs per status after update (as of ``crawldb_version``, if given)."""
    if fig.step == "fetch" and fig.segment_id:
        extra = fetch_figures(spark, root, fig.segment_id)
        fig.bytes, fig.latency_ms, fig.politeness_bound_s = extra["bytes"], extra["latency_ms"], extra["politeness_bound_s"]
        fig.by_content_type = extra["by_content_type"]
    elif fig.step == "update":
        fig.crawldb_by_status = crawldb_by_status(spark, root, crawldb_version)
        fig.crawldb_urls = sum(fig.crawldb_by_status.values())


def step_figures(spark: SparkSession, root: CrawlRoot, step: str, result: Any, started_at: float,
                 seconds: float) -> StepFigures:
    """result_figures, then add_query_figures."""
    fig = result_figures(step, result, started_at, seconds)
    add_query_figures(spark, root, fig)
    return fig


def _summary(result: Any) -> str:
    """A step's end line: its result's own summary (every step's result dataclass has one)."""
    return result.summary() if hasattr(result, "summary") else "done"


# ---------------------------------------------------------------------------------------------
# the cycles table


def append_cycle_rows(spark: SparkSession, root: CrawlRoot, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append rows (crawl.tracking.cycle_row) to <crawl_root>/cycles: one Delta commit."""
    if not rows:
        return
    ensure_cycles_table(spark, root)
    names = CYCLES_SCHEMA.fieldNames()
    data = [tuple(datetime.fromtimestamp(r[n], timezone.utc) if n == "started_at" else r[n] for n in names)
            for r in rows]
    spark.createDataFrame(data, CYCLES_SCHEMA).write.format("delta").mode("append").save(root.cycles)


def record_step(spark: SparkSession, cfg: Config, root: CrawlRoot, step: str, run: Callable[[], Any],
                args: argparse.Namespace, what: str = "") -> Any:
    """Run one step on its own (``deltacrawl fetch SEG`` ...) between its start and end lines on
    stderr (``what`` names its input) and append its row to the cycles table; with --crawl-id,
    as one step of that crawl run (module docstring). Returns what the step returned."""
    prog = f"deltacrawl {step}"
    crawl_id, cycle = run_context(args, step)
    tracker = None
    if crawl_id is not None:
        tracker = CrawlTracker.open(cfg, root.root, getattr(args, "mlflow_uri", None), prog)
        if tracker is not None:
            tracker.attach(crawl_id, cfg, {"deltacrawl.crawl_root": root.root})
        set_crawl_cycle(spark, crawl_id, cycle)
    started_at, failed = time.time(), "FAILED"
    try:
        result, seconds = log_step(step, what, run, _summary)
        failed = ""
    except KeyboardInterrupt:
        failed = "KILLED"
        raise
    finally:
        if crawl_id is not None:
            set_crawl_cycle(spark, None, None)
        if tracker is not None and failed:
            tracker.abort(failed)
    warn = OneLineWarnings(prog)
    run_id = tracker.run_id if tracker is not None else None
    try:
        fig = step_figures(spark, root, step, result, started_at, seconds)
        append_cycle_rows(spark, root, [cycle_row(fig, crawl_id, run_id, cycle)])
    except Exception as exc:  # the step's own work is done and committed: never fail it now
        warn("recording the step in the cycles table", exc, "the step itself succeeded")
        return result
    if tracker is not None:
        tracker.log_cycle(cycle, [fig], cycle_total=False)
        if step == "update":
            try:
                steps = [f for c, figs in cycles_of_run(spark, root, crawl_id) if c == cycle for f in figs]
                tracker.log_values(cycle, {"seconds/cycle": sum(f.seconds for f in steps if f.step in CYCLE_STEPS)})
            except Exception as exc:  # recorded: one warning line
                warn("reading the cycle's rows back", exc, "seconds/cycle is not logged for this cycle")
    return result


def cycles_of_run(spark: SparkSession, root: CrawlRoot, crawl_id: str,
                  fetch_details: bool = False) -> list[tuple[int, list[StepFigures]]]:
    """A crawl run's steps as recorded in the cycles table, by cycle (a retried step's newest row
    wins); with ``fetch_details``, fetch's latency buckets and politeness bound are read again
    from its segment (they are not in the table)."""
    table = spark.read.format("delta").load(root.cycles)
    if "by_content_type" not in table.columns:  # a table no step has appended to since the column came
        table = table.withColumn("by_content_type", F.lit(None).cast(CYCLES_SCHEMA["by_content_type"].dataType))
    rows = table.filter(F.col("crawl_id") == crawl_id).orderBy("started_at").collect()
    newest: dict[tuple[int, str], Any] = {}
    for row in rows:
        newest[(row["cycle"], row["step"])] = row
    out: dict[int, list[StepFigures]] = {}
    for (cycle, step), row in sorted(newest.items(), key=lambda kv: kv[1]["started_at"]):
        fig = StepFigures(step, row["started_at"].timestamp(), row["seconds"], segment_id=row["segment_id"],
                          urls=row["urls"], hosts=row["hosts"],
                          by_outcome=dict(row["by_outcome"]) if row["by_outcome"] is not None else None,
                          bytes=row["bytes"], new_urls=row["new_urls"], duplicates=row["duplicates"],
                          crawldb_urls=row["crawldb_urls"],
                          crawldb_by_status=dict(row["crawldb_by_status"]) if row["crawldb_by_status"] else None,
                          by_content_type=dict(row["by_content_type"]) if row["by_content_type"] is not None else None)
        if fetch_details and step == "fetch" and fig.segment_id:
            extra = fetch_figures(spark, root, fig.segment_id)
            fig.latency_ms, fig.politeness_bound_s = extra["latency_ms"], extra["politeness_bound_s"]
        out.setdefault(cycle, []).append(fig)
    return sorted(out.items())


def finish_run(spark: SparkSession, cfg: Config, root: CrawlRoot, args: argparse.Namespace,
               stats: Mapping[str, Any]) -> None:
    """``stats --crawl-id ID``: end that crawl run's MLflow run like ``crawl`` ends its own."""
    crawl_id, _ = run_context(args, "stats")
    if crawl_id is None:
        return
    tracker = CrawlTracker.open(cfg, root.root, getattr(args, "mlflow_uri", None), "deltacrawl stats")
    if tracker is None:
        return
    try:
        cycles = cycles_of_run(spark, root, crawl_id, fetch_details=True)
    except Exception as exc:  # recorded: one warning line
        OneLineWarnings("deltacrawl stats")("reading the crawl run's cycles", exc, "its charts are left out")
        cycles = []
    tracker.attach(crawl_id, cfg, {"deltacrawl.crawl_root": root.root})
    ran = [c for c, steps in cycles if any(f.step == "update" for f in steps)]
    tracker.finish(cycles, stats, {"deltacrawl.cycles_run": str(len(ran))})


# ---------------------------------------------------------------------------------------------
# MLflow


def _quiet_mlflow_logs() -> None:
    # MLflow and alembic log at INFO to stderr while creating a store ("Creating initial MLflow
    # database tables..."); our stderr carries our progress and errors only. (After importing
    # mlflow: its import sets up its logger.)
    import mlflow  # noqa: F401
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _create_sqlite_store(uri: str, artifact_location: str | None) -> None:
    """Make a new SQLite store with its "Default" experiment's artifacts beside the file: MLflow
    would put them under ./mlruns of whatever folder the first step ran in (for an Airflow task,
    a temporary folder deleted when the task ends)."""
    path = os.path.abspath(uri[len("sqlite:///"):])
    if os.path.exists(path) or artifact_location is None:
        return
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    SqlAlchemyStore(uri, artifact_location)


class CrawlTracker:
    """The MLflow run of one crawl, through MlflowClient (no fluent API: no active-run global, no
    ./mlruns default, nothing printed). Every call is guarded: the first failure prints one line
    and turns tracking off for the rest of the crawl."""

    def __init__(self, store: TrackingStore, experiment: str, warn: OneLineWarnings):
        self.store = store
        self.experiment = experiment
        self.warn = warn
        self.client = None
        self.run_id: str | None = None

    @classmethod
    def open(cls, cfg: Config, crawl_root: str, cli_uri: str | None, prog: str) -> "CrawlTracker | None":
        """None when tracking is off (--mlflow-uri off, mlflow.tracking_uri = "off")."""
        store = tracking_store(crawl_root, cli_uri, cfg.mlflow.tracking_uri, os.environ)
        return None if store is None else cls(store, cfg.mlflow.experiment, OneLineWarnings(prog))

    @property
    def active(self) -> bool:
        return self.run_id is not None

    def _guard(self, what: Callable[[], Any]) -> Any:
        try:
            return what()
        except Exception as exc:  # recorded: one warning line, then tracking is off
            self.warn(f"MLflow tracking ({self.store.tracking_uri})", exc,
                      "the crawl goes on without tracking")
            client, run_id = self.client, self.run_id
            self.client, self.run_id = None, None
            if client is not None and run_id is not None:
                try:  # best effort: a run that stopped being tracked says so
                    client.set_tag(run_id, "deltacrawl.tracking_error", f"{type(exc).__name__}: {exc}"[:_MAX_TAG_CHARS])
                    client.set_terminated(run_id, "FAILED")
                except Exception:  # cleanup: best effort, the warning above says tracking stopped
                    pass
            return None

    def start(self, crawl_id: str, cfg: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        self._guard(lambda: self._start(crawl_id, cfg, tags))

    def attach(self, crawl_id: str, cfg: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Continue the run of ``crawl_id`` (status RUNNING again), or start it if there is none."""
        self._guard(lambda: self._attach(crawl_id, cfg, tags))

    def _client_and_experiment(self) -> tuple[Any, str]:
        _quiet_mlflow_logs()
        from mlflow.tracking import MlflowClient
        uri = self.store.tracking_uri
        if uri.startswith("sqlite:///"):
            # SQLite creates the file, not its folder (the crawl root may not exist yet)
            os.makedirs(os.path.dirname(os.path.abspath(uri[len("sqlite:///"):])), exist_ok=True)
            _create_sqlite_store(uri, self.store.artifact_location)
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            return client, client.create_experiment(self.experiment, artifact_location=self.store.artifact_location)
        return client, experiment.experiment_id

    def _attach(self, crawl_id: str, cfg: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        client, experiment_id = self._client_and_experiment()
        found = client.search_runs([experiment_id], filter_string=f"tags.`deltacrawl.crawl_id` = '{crawl_id}'",
                                   max_results=1, order_by=["attributes.start_time DESC"])
        if not found:
            self._start(crawl_id, cfg, tags)
            return
        self.client, self.run_id = client, found[0].info.run_id
        if found[0].info.status != "RUNNING":
            client.update_run(self.run_id, status="RUNNING")

    def _start(self, crawl_id: str, cfg: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        from mlflow.entities import Param
        client, experiment_id = self._client_and_experiment()
        all_tags = {"deltacrawl.crawl_id": crawl_id, "deltacrawl.tracking_store": self.store.why, **tags}
        run = client.create_run(experiment_id, run_name=crawl_id,
                                tags={k: str(v)[:_MAX_TAG_CHARS] for k, v in all_tags.items()})
        self.client, self.run_id = client, run.info.run_id  # from here on a failure marks the run
        params = [Param(k, v) for k, v in config_params(cfg).items()]
        for i in range(0, len(params), _PARAMS_PER_BATCH):
            client.log_batch(self.run_id, params=params[i:i + _PARAMS_PER_BATCH])
        client.log_text(self.run_id, json.dumps(config_document(cfg), indent=2, default=str), "config.json")

    def log_cycle(self, cycle: int, steps: Sequence[StepFigures], cycle_total: bool = True) -> None:
        if self.active:
            self._guard(lambda: self._log_metrics(cycle, cycle_metrics(steps, cycle_total)))

    def log_values(self, cycle: int, values: Mapping[str, float]) -> None:
        if self.active:
            self._guard(lambda: self._log_metrics(cycle, values))

    def _log_metrics(self, cycle: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric
        now_ms = int(time.time() * 1000)
        metrics = [Metric(k, v, now_ms, cycle) for k, v in values.items()]
        for i in range(0, len(metrics), _METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + _METRICS_PER_BATCH])

    def finish(self, cycles: Sequence[tuple[int, Sequence[StepFigures]]], stats: Mapping[str, Any] | None,
               tags: Mapping[str, str]) -> None:
        """The crawl is done: artifacts (stats.json, cycles.json, charts/*.png), final tags, FINISHED."""
        if self.active:
            self._guard(lambda: self._finish(cycles, stats, tags))

    def _finish(self, cycles, stats, tags) -> None:
        from crawl.charts import render_all
        client, run_id = self.client, self.run_id
        for key, value in tags.items():
            client.set_tag(run_id, key, str(value)[:_MAX_TAG_CHARS])
        if stats is not None:
            client.log_text(run_id, json.dumps(stats, indent=2, default=str), "stats.json")
        client.log_text(run_id, json.dumps(figures_document(cycles), indent=2, default=str), "cycles.json")
        try:
            with tempfile.TemporaryDirectory(prefix="deltacrawl-charts-") as folder:
                render_all(cycles, (stats or {}).get("top_hosts", []), folder)
                client.log_artifacts(run_id, folder, "charts")
        finally:
            client.set_terminated(run_id, "FINISHED")

    def abort(self, status: str) -> None:
        """The crawl failed before finish(): mark the run so (best effort, silent)."""
        if self.active:
            client, run_id = self.client, self.run_id
            self.client, self.run_id = None, None
            try:
                client.set_terminated(run_id, status)
            except Exception:  # cleanup: best effort, the step's own failure is what is reported
                pass


# ---------------------------------------------------------------------------------------------
# a crawl's recorder


def _bookkeeping_session(spark: SparkSession) -> SparkSession:
    """A session sharing ``spark``'s SparkContext, with its SQL and Delta settings (those set at
    run time too: under spark-submit the context predates them) but none of a step's own
    (its commit label, its idempotent-write pair)."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key.startswith(("spark.sql.", "spark.databricks.delta.")) and key not in _STEP_SETTINGS:
            try:
                session.conf.set(key, value)
            except Exception:  # a static setting: shared with the context already
                pass
    return session


_STEP_SETTINGS = (USER_METADATA_CONF, TXN_APP_ID, TXN_VERSION)


@dataclass
class CrawlRecorder:
    """Times each step of a crawl, collects its figures (the one place they are kept), and at the
    end of each cycle appends the cycle's rows to the cycles table and logs its MLflow metrics.

    The crawl does not wait for its bookkeeping: the figure queries, the cycles-table append and
    the MLflow metrics run in order on one background thread while the crawl goes on with its next
    step (they took 1.4-1.7 s between a cycle's update and the next generate: docs/decisions.md
    "Cycle cost, fourth round"). They use a session of their own (``spark.newSession()``, sharing the
    SparkContext): its settings are its own, so the cycles commit carries its cycle's label
    (jobs/engine/commit_info.py) and never a step's write settings, and the step's commits never carry
    the bookkeeping's. What they read does not move under them: the segment's fetched files, and
    the crawldb at the version update left it (pinned). ``close()`` waits for them."""
    spark: SparkSession
    root: CrawlRoot
    crawl_id: str
    tracker: CrawlTracker | None
    warn: OneLineWarnings
    cycles: list[tuple[int, list[StepFigures]]] = field(default_factory=list)
    recorded: set[int] = field(default_factory=set)  # cycles whose rows were handed to the worker
    _worker: ThreadPoolExecutor | None = field(default=None, repr=False)
    # steps of two cycles run at once with crawl.overlap (fetch on its own thread)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _session: SparkSession | None = field(default=None, repr=False)

    def _background(self, work: Callable[[SparkSession], None]) -> None:
        """Run ``work(session)`` on the bookkeeping thread, after what was submitted before."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltacrawl-recorder")
            self._session = _bookkeeping_session(self.spark)
        session = self._session
        self._worker.submit(work, session)

    def _steps_of(self, cycle: int) -> list[StepFigures]:
        """The figures list of ``cycle`` (made when its first step starts); under the lock."""
        for number, steps in reversed(self.cycles):
            if number == cycle:
                return steps
        self.cycles.append((cycle, []))
        self.cycles.sort(key=lambda c: c[0])
        return self._steps_of(cycle)

    def run_step(self, cycle: int, step: str, run: Callable[[], Any], what: str = "") -> Any:
        with self._lock:
            steps = self._steps_of(cycle)
        started_at = time.time()
        result, seconds = log_step(step, f"cycle {cycle}" + (f", {what}" if what else ""), run, _summary)
        fig = result_figures(step, result, started_at, seconds)
        with self._lock:
            steps.append(fig)
        if step in ("fetch", "update"):
            try:  # the crawldb as update left it: the next generate's lease commits soon after
                version = table_version(self.spark, self.root.crawldb) if step == "update" else None
            except Exception as exc:  # recorded: one warning line
                self.warn("collecting step figures", exc, "the crawl goes on with the step's own counts missing")
                return result

            def figures(session: SparkSession) -> None:
                try:
                    add_query_figures(session, self.root, fig, version)
                except Exception as exc:  # recorded: one warning line
                    self.warn("collecting step figures", exc, "the crawl goes on with the step's own counts missing")
            self._background(figures)
        return result

    def end_cycle(self, cycle: int | None = None) -> list[StepFigures]:
        """``cycle`` (None: the latest begun) is complete, or the crawl stops in it: record it,
        once (in the background, after its figures)."""
        with self._lock:
            if not self.cycles:
                return []
            number = self.cycles[-1][0] if cycle is None else cycle
            steps = next((s for c, s in self.cycles if c == number), [])
            if not steps or number in self.recorded:
                return []
            self.recorded.add(number)
            cycle = number
        run_id = self.tracker.run_id if self.tracker is not None else None
        label = json.dumps(commit_metadata(None))  # this cycle's, whatever cycle has begun by then

        def record(session: SparkSession) -> None:
            try:
                session.conf.set(USER_METADATA_CONF, label)
                append_cycle_rows(session, self.root, [cycle_row(f, self.crawl_id, run_id, cycle) for f in steps])
            except Exception as exc:  # recorded: one warning line
                self.warn("appending to the cycles table", exc, "the crawl goes on without it")
            if self.tracker is not None:
                self.tracker.log_cycle(cycle, steps)
        self._background(record)
        return steps

    def close(self, cancel: bool = False) -> None:
        """Wait for the bookkeeping submitted so far (``cancel``: drop what has not started)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=cancel)
            self._worker = None
