"""PNG charts of a crawl, from plain values (crawl.tracking's figures and the stats summary),
for the MLflow run's artifacts.

matplotlib's object API (``Figure`` + the Agg canvas) is used, never pyplot: no global figure
state, no GUI backend chosen from the environment, nothing shown.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from crawl.tracking import CYCLE_STEPS, StepFigures, latency_histogram, merge_counts

_WIDTH, _HEIGHT, _DPI = 8.0, 4.5, 100


def _figure(rows: int = 1):
    from matplotlib.figure import Figure
    return Figure(figsize=(_WIDTH, _HEIGHT * rows), dpi=_DPI, layout="constrained")


def _stacked_bars(ax, cycles: Sequence[int], series: Mapping[str, Sequence[float]], ylabel: str, title: str) -> None:
    bottom = [0.0] * len(cycles)
    for name, values in series.items():
        ax.bar([str(c) for c in cycles], values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("cycle")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _by_cycle(cycles: Sequence[tuple[int, Sequence[StepFigures]]], step: str) -> list[tuple[int, StepFigures]]:
    return [(cycle, fig) for cycle, steps in cycles for fig in steps if fig.step == step]


def status_mix(cycles: Sequence[tuple[int, Sequence[StepFigures]]], path: str) -> str:
    """Two panels: the crawldb's URLs per status after each cycle, and each cycle's fetch outcomes."""
    fig = _figure(rows=2)
    top, bottom = fig.subplots(2, 1)
    updates = _by_cycle(cycles, "update")
    statuses = sorted(merge_counts(f.crawldb_by_status for _, f in updates))
    _stacked_bars(top, [c for c, _ in updates],
                  {s: [(f.crawldb_by_status or {}).get(s, 0) for _, f in updates] for s in statuses},
                  "URLs", "crawldb by status after each cycle")
    fetches = _by_cycle(cycles, "fetch")
    outcomes = sorted(merge_counts(f.by_outcome for _, f in fetches))
    _stacked_bars(bottom, [c for c, _ in fetches],
                  {s: [(f.by_outcome or {}).get(s, 0) for _, f in fetches] for s in outcomes},
                  "URLs", "fetch outcomes per cycle")
    return _save(fig, path)


def step_seconds(cycles: Sequence[tuple[int, Sequence[StepFigures]]], path: str) -> str:
    """Seconds per step, stacked per cycle."""
    fig = _figure()
    ax = fig.subplots()
    numbers = [cycle for cycle, steps in cycles if any(f.step in CYCLE_STEPS for f in steps)]
    per_cycle = {cycle: {f.step: f.seconds for f in steps} for cycle, steps in cycles}
    _stacked_bars(ax, numbers, {step: [per_cycle[c].get(step, 0.0) for c in numbers] for step in CYCLE_STEPS},
                  "seconds", "time per step")
    return _save(fig, path)


def fetch_latency(buckets: Mapping[int, int], path: str) -> str:
    """Histogram of the fetch requests' elapsed time, in log2 buckets."""
    fig = _figure()
    ax = fig.subplots()
    bars = latency_histogram(buckets)
    ax.bar([label for label, _ in bars], [n for _, n in bars])
    ax.set_xlabel("elapsed ms (request sent to body read)")
    ax.set_ylabel("URLs")
    ax.set_title(f"fetch latency ({sum(buckets.values())} URLs)")
    ax.tick_params(axis="x", labelrotation=45, labelsize="small")
    return _save(fig, path)


def top_hosts(hosts: Sequence[tuple[str, int]], path: str) -> str:
    """The hosts with the most URLs in the crawldb (stats' top_hosts), largest on top."""
    fig = _figure()
    ax = fig.subplots()
    ordered = list(reversed(list(hosts)))
    ax.barh([h for h, _ in ordered], [n for _, n in ordered])
    ax.set_xlabel("URLs in the crawldb")
    ax.set_title(f"top {len(ordered)} hosts")
    ax.tick_params(axis="y", labelsize="small")
    return _save(fig, path)


def _save(fig, path: str) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, format="png")
    return path


def render_all(cycles: Sequence[tuple[int, Sequence[StepFigures]]], top: Sequence[tuple[str, int]],
               folder: str) -> list[str]:
    """Every chart of a crawl into ``folder``; returns the files written."""
    latency = merge_counts(f.latency_ms for _, f in _by_cycle(cycles, "fetch"))
    return [status_mix(cycles, os.path.join(folder, "status_mix.png")),
            step_seconds(cycles, os.path.join(folder, "step_seconds.png")),
            fetch_latency(latency, os.path.join(folder, "fetch_latency.png")),
            top_hosts(top, os.path.join(folder, "top_hosts.png"))]
