"""What a crawl records about itself, as plain values: one ``StepFigures`` per step run, from
which both the ``cycles`` Delta table's rows and the MLflow metrics of a cycle are derived (so
the two never disagree), the MLflow params of a config, and where the tracking store is.

Spark collects the figures (jobs/engine/tracking.py); this module only shapes them.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from crawl.crawldb.status import FetchStatus

# The steps of one cycle, in order; a crawl also records "inject" as cycle 0.
CYCLE_STEPS = ("generate", "fetch", "dedup", "update")
INJECT_CYCLE = 0

# Outcomes in which a request was sent (fetch pages/s counts these): robots_denied,
# blocked_address, deferred and not_attempted send nothing, and neither does a name that did not
# resolve (dns_error) or a TLS handshake that failed (tls_error).
REQUESTED_OUTCOMES = tuple(s for s in FetchStatus.ALL
                           if s not in (FetchStatus.ROBOTS_DENIED, FetchStatus.BLOCKED_ADDRESS,
                                        FetchStatus.DEFERRED, FetchStatus.NOT_ATTEMPTED,
                                        FetchStatus.DNS_ERROR, FetchStatus.TLS_ERROR))

# MLflow param values longer than this are cut (the full config is logged as config.json).
# MLflow 3 accepts 6,000 characters, tracking servers before 1.30 only 500: the smaller limit
# works with any server.
MAX_PARAM_CHARS = 500
# Config keys whose values are credentials: logged as "(set)" or "", never as they are.
_SECRET_WORDS = ("secret", "password", "token", "credential", "access_key", "access.key", "secret.key")


@dataclass
class StepFigures:
    """What one run of one step did. Which count fields a step fills is documented with the
    ``cycles`` table in docs/crawldb.md; the others stay None."""
    step: str
    started_at: float                  # epoch seconds
    seconds: float                     # wall time of the step itself (not of collecting these figures)
    segment_id: str | None = None
    urls: int | None = None            # inject: valid seeds · generate: URLs in the fetchlist ·
                                       # fetch: URLs attempted · dedup: pages compared · update: URLs updated
    hosts: int | None = None           # generate, fetch: hosts in the segment · update: hosts merged
    by_outcome: dict[str, int] | None = None   # fetch: URLs per fetch_status
    bytes: int | None = None           # fetch: sum of content_length (bytes read, after decoding)
    new_urls: int | None = None        # inject: seeds inserted · update: discovered URLs inserted
    duplicates: int | None = None      # dedup: exact + near duplicates found
    crawldb_urls: int | None = None    # update: URLs in the crawldb after the step
    crawldb_by_status: dict[str, int] | None = None  # update: crawldb URLs per status after the step
    by_content_type: dict[str, int] | None = None    # fetch: URLs answered per media type
    # fetch only; in MLflow, not in the table (derived, or too detailed for it)
    politeness_bound_s: float | None = None   # max over hosts of (requests - 1) x its minimum gap
    latency_ms: dict[int, int] = field(default_factory=dict)  # log2 bucket of elapsed_ms -> URLs
    blocked: dict[str, int] = field(default_factory=dict)     # URLs the address guard refused, by reason
    robots_errors: int | None = None          # hosts not crawled: robots.txt unreachable or unparsable
    sitemap_errors: int | None = None         # sitemap and feed files refused or cut short
    dns_errors: int | None = None             # hosts whose name did not resolve
    tls_errors: int | None = None             # hosts whose TLS handshake failed
    dns_queries: int | None = None            # DNS queries the fetch tasks sent


def cycle_row(fig: StepFigures, crawl_id: str | None, mlflow_run_id: str | None, cycle: int | None) -> dict[str, Any]:
    """The ``cycles`` table row of one step (times as epoch seconds; jobs/engine/tracking.py converts)."""
    row = {name: getattr(fig, name) for name in
           ("step", "segment_id", "started_at", "seconds", "urls", "hosts", "by_outcome", "bytes", "new_urls",
            "duplicates", "crawldb_urls", "crawldb_by_status", "by_content_type")}
    return {"crawl_id": crawl_id, "mlflow_run_id": mlflow_run_id, "cycle": cycle, **row}


def pages_per_s(fig: StepFigures) -> float | None:
    """Requests sent per second of the fetch step (None without a measurable time)."""
    if fig.by_outcome is None or fig.seconds <= 0:
        return None
    return sum(fig.by_outcome.get(s, 0) for s in REQUESTED_OUTCOMES) / fig.seconds


def politeness_efficiency(fig: StepFigures) -> float | None:
    """Politeness lower bound / fetch step time, as BENCHMARKS.md measures it: the slowest host
    needs at least (requests - 1) gaps of its minimum delay, however fast everything else is, so
    1.0 is a fetch that took no longer than politeness demands. None when no host had to wait
    (delay 0, or one request per host): the fetch was not politeness-bound, and the ratio would
    only measure Spark's overhead."""
    if not fig.politeness_bound_s or fig.seconds <= 0:
        return None
    return fig.politeness_bound_s / fig.seconds


def cycle_metrics(steps: Sequence[StepFigures], cycle_total: bool = True) -> dict[str, float]:
    """The MLflow metrics of one cycle's steps (logged with step = cycle number). Every fetch
    outcome is logged, zero included, so each series has a point in every cycle. ``cycle_total``:
    also seconds/cycle, the sum over the cycle's steps (off when ``steps`` is one step of several)."""
    out: dict[str, float] = {}
    for fig in steps:
        out[f"seconds/{fig.step}"] = fig.seconds
        if fig.step == "inject":
            out["inject/seeds"] = fig.urls or 0
            out["inject/new_urls"] = fig.new_urls or 0
        elif fig.step == "generate":
            out["generate/urls"] = fig.urls or 0
            out["generate/hosts"] = fig.hosts or 0
        elif fig.step == "fetch":
            outcomes = fig.by_outcome or {}
            out["fetch/urls"] = fig.urls or 0
            for status in FetchStatus.ALL:
                out[f"fetch/outcome/{status}"] = outcomes.get(status, 0)
            out["fetch/robots_denied"] = outcomes.get(FetchStatus.ROBOTS_DENIED, 0)
            out["fetch/robots_errors"] = fig.robots_errors or 0
            out["fetch/sitemap_errors"] = fig.sitemap_errors or 0
            out["fetch/dns_errors"] = fig.dns_errors or 0
            out["fetch/tls_errors"] = fig.tls_errors or 0
            out["fetch/dns_queries"] = fig.dns_queries or 0
            for reason, n in fig.blocked.items():
                out[f"fetch/blocked/{reason}"] = n
            out["fetch/bytes"] = fig.bytes or 0
            rate = pages_per_s(fig)
            if rate is not None:
                out["fetch/pages_per_s"] = rate
            efficiency = politeness_efficiency(fig)
            if efficiency is not None:
                out["fetch/politeness_efficiency"] = efficiency
                out["fetch/politeness_bound_s"] = fig.politeness_bound_s
            for name, value in latency_percentiles(fig.latency_ms).items():
                out[f"fetch/latency_{name}_ms"] = value
        elif fig.step == "dedup":
            out["dedup/pages"] = fig.urls or 0
            out["dedup/duplicates"] = fig.duplicates or 0
        elif fig.step == "update":
            out["update/urls"] = fig.urls or 0
            out["update/new_urls"] = fig.new_urls or 0
            if fig.crawldb_urls is not None:
                out["crawldb/urls"] = fig.crawldb_urls
            for status, n in (fig.crawldb_by_status or {}).items():
                out[f"crawldb/status/{status}"] = n
    if cycle_total and any(f.step in CYCLE_STEPS for f in steps):
        out["seconds/cycle"] = sum(f.seconds for f in steps if f.step in CYCLE_STEPS)
    return {k: float(v) for k, v in out.items()}


def latency_bucket_ms(bucket: int) -> tuple[int, int]:
    """The elapsed_ms range [low, high) of a log2 latency bucket (bucket 0 holds 0 and 1 ms)."""
    return (0 if bucket == 0 else 2 ** bucket, 2 ** (bucket + 1))


def latency_percentiles(buckets: Mapping[int, int]) -> dict[str, float]:
    """p50/p90/p99 estimated from log2 buckets: inside the bucket that holds the percentile, by
    geometric interpolation on its rank (requests spread evenly on a log scale across the bucket),
    so the estimate lies within the bucket, a factor of 2 of the exact value at most, and is not
    one of a few bucket edges (4, 32, 128, ...) that read as exact."""
    total = sum(buckets.values())
    if not total:
        return {}
    out: dict[str, float] = {}
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        seen = 0
        for bucket in sorted(buckets):
            n = buckets[bucket]
            if n and seen + n >= q * total:
                low, high = latency_bucket_ms(bucket)
                share = (q * total - seen) / n  # how far into the bucket the percentile's rank is
                out[name] = round(high * share if low == 0 else low * (high / low) ** share, 1)
                break
            seen += n
    return out


def latency_histogram(buckets: Mapping[int, int]) -> list[tuple[str, int]]:
    """(label, URLs) for every log2 bucket from the fastest to the slowest seen, empty ones
    included, so a chart's x axis is a true log scale."""
    if not buckets:
        return []
    return [(f"{latency_bucket_ms(b)[0]}-{latency_bucket_ms(b)[1]}", int(buckets.get(b, 0)))
            for b in range(min(buckets), max(buckets) + 1)]


def merge_counts(maps: Iterable[Mapping[Any, int] | None]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for m in maps:
        for k, v in (m or {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def config_params(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Every config key as an MLflow param value: scalars as text, lists and tables as JSON, cut
    at MAX_PARAM_CHARS; credentials hidden."""
    out: dict[str, str] = {}
    for key in sorted(cfg):
        value = cfg[key]
        if _is_secret(key):
            text = "(set)" if value else ""
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, sort_keys=True, default=str)
        if len(text) > MAX_PARAM_CHARS:
            suffix = "... (cut: see config.json)"
            text = text[:MAX_PARAM_CHARS - len(suffix)] + suffix
        out[key] = text
    return out


def config_document(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The whole effective config for the config.json artifact (credentials hidden likewise)."""
    return {k: ("(set)" if cfg[k] else "") if _is_secret(k) else cfg[k] for k in sorted(cfg)}


@dataclass(frozen=True)
class TrackingStore:
    """Where a crawl's MLflow run goes: a tracking URI, and for a store of ours, the artifact
    location of a new experiment (None: the tracking server decides)."""
    tracking_uri: str
    artifact_location: str | None
    why: str  # "default: ...", "--mlflow-uri", "mlflow.tracking_uri", "MLFLOW_TRACKING_URI"


OFF = "off"


def _is_local_root(root: str) -> bool:
    return "://" not in root or root.startswith("file://")


def _sqlite_artifacts(uri: str) -> str | None:
    """Artifacts of a SQLite store go beside its file (MLflow's own default is ./mlruns in the
    working directory, which depends on where the crawl was started)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = os.path.abspath(uri[len("sqlite:///"):])
    return "file://" + os.path.join(os.path.dirname(path), "mlruns")


def store_name(crawl_root: str) -> str:
    """A folder name for a non-local crawl root: readable, and unique per root string."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", crawl_root.rstrip("/")).strip("-.")[:80]
    return f"{slug}-{hashlib.sha1(crawl_root.rstrip('/').encode('utf-8')).hexdigest()[:8]}"


def data_home(environ: Mapping[str, str]) -> str:
    """$XDG_DATA_HOME, else ~/.local/share (data, not a cache: run history cannot be rebuilt)."""
    base = environ.get("XDG_DATA_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"),
                                                         ".local", "share")
    return os.path.join(base, "deltacrawl", "mlflow")


def tracking_store(crawl_root: str, cli_uri: str | None, conf_uri: str,
                   environ: Mapping[str, str]) -> TrackingStore | None:
    """The store of a crawl (None: tracking is off). --mlflow-uri wins, then mlflow.tracking_uri,
    then $MLFLOW_TRACKING_URI; without any, a SQLite file in a local crawl root
    (<root>/mlflow.db, artifacts in <root>/mlruns); for an object-store (or HDFS) root, where
    SQLite cannot live, the same pair in a local folder named after the root under
    $XDG_DATA_HOME/deltacrawl/mlflow (~/.local/share/...)."""
    for uri, why in ((cli_uri, "--mlflow-uri"), (conf_uri, "mlflow.tracking_uri"),
                     (environ.get("MLFLOW_TRACKING_URI"), "MLFLOW_TRACKING_URI")):
        if uri and uri.strip():
            uri = uri.strip()
            if uri.lower() == OFF:
                return None
            return TrackingStore(uri, _sqlite_artifacts(uri), why)
    if _is_local_root(crawl_root):
        folder = os.path.abspath(crawl_root.removeprefix("file://"))
        why = "default: in the crawl root"
    else:
        folder = os.path.join(data_home(environ), store_name(crawl_root))
        why = "default: local store of a non-local crawl root"
    return TrackingStore("sqlite:///" + os.path.join(folder, "mlflow.db"),
                         "file://" + os.path.join(folder, "mlruns"), why)


def figures_document(cycles: Sequence[tuple[int, Sequence[StepFigures]]]) -> list[dict[str, Any]]:
    """Every step's figures, for the cycles.json artifact."""
    return [dict(cycle=cycle, **asdict(fig)) for cycle, steps in cycles for fig in steps]
