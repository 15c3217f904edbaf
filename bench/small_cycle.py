#!/usr/bin/env python
"""Small-cycle benchmark (issue 13's first target): what `make demo` waits for. Runs
`deltacrawl crawl --with-devweb` (10 hosts, 3 cycles by default) with this tree's code and with a
baseline commit's code, interleaved in one run, and compares each step's seconds.

Run:      .venv/bin/python bench/small_cycle.py [--baseline REV] [--current REV] [--repeats 2]
          [--cycles 3] [--hosts 10] [--out-json FILE]
Baseline: REV (default HEAD~1) checked out in a temporary git worktree, and so is --current REV
          if given (default: this working tree, as it is while the bench runs); both trees run with
          this .venv's Python and packages (PYTHONPATH picks the tree), one crawl at a time,
          alternating (baseline, current, baseline, current, ...), each crawl a fresh JVM and a
          fresh crawl root with tracking off.
Measures: per crawl, each step's seconds per cycle from its stderr end lines ("crawl: cycle N/M
          done in ... (generate a s, fetch b s, dedup c s, update d s)"); "outside fetch" =
          generate + dedup + update of a warm cycle (cycle 2 and later); the median over
          repeats of each, and current / baseline.
Exit:     0 done · 1 a crawl failed · 2 bad arguments.

Everything stays on loopback: the test web binds 127.0.x.y addresses only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, finish, machine_facts  # noqa: E402

CYCLE_LINE = re.compile(r"crawl: cycle (\d+)/\d+ done in [\d.]+ ?s \((.*)\)")
STEP = re.compile(r"(\w+) ([\d.]+) ?s")
STEPS = ("generate", "fetch", "dedup", "update")


def crawl_once(tree: str, cycles: int, hosts: int, workdir: str,
               conf: tuple[str, ...] = ()) -> dict[int, dict[str, float]]:
    """One `deltacrawl crawl --with-devweb` with ``tree``'s code and the ``conf`` overrides
    (KEY=VALUE); {cycle: {step: seconds}}."""
    root = tempfile.mkdtemp(prefix="crawl-", dir=workdir)
    env = dict(os.environ, PYTHONPATH=tree)
    # --with-devweb allows exactly the test web it starts (the address guard refuses loopback)
    argv = [sys.executable, "-m", "jobs.cli", "crawl", "--with-devweb", "--cycles", str(cycles),
            "--crawl-root", root, "--mlflow-uri", "off", "--conf", "devweb.port=0",
            "--conf", f"devweb.hosts={hosts}", *(arg for pair in conf for arg in ("--conf", pair))]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree, timeout=3600)
    shutil.rmtree(root, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"crawl with {tree} exited {proc.returncode}: {proc.stderr[-2000:]}")
    out: dict[int, dict[str, float]] = {}
    for match in CYCLE_LINE.finditer(proc.stdout + proc.stderr):
        out[int(match.group(1))] = {name: float(sec) for name, sec in STEP.findall(match.group(2))}
    if len(out) != cycles:
        raise RuntimeError(f"crawl with {tree}: expected {cycles} cycle lines, got {len(out)}")
    return out


def checkout(revision: str, folder: str) -> str:
    """``revision`` checked out (detached) in a new git worktree at ``folder``; its commit id."""
    rev = subprocess.run(["git", "rev-parse", revision], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    subprocess.run(["git", "worktree", "add", "--detach", folder, rev], cwd=REPO, check=True, capture_output=True)
    return rev


def summarise(runs: list[dict[int, dict[str, float]]]) -> dict[str, float]:
    """Medians over runs: each step of the warm cycles (2+), and their sum outside fetch."""
    def warm(run, step):
        values = [c[step] for n, c in run.items() if n >= 2] or [c[step] for c in run.values()]
        return statistics.mean(values)
    out = {step: statistics.median(warm(r, step) for r in runs) for step in STEPS}
    out["outside_fetch"] = statistics.median(sum(warm(r, s) for s in ("generate", "dedup", "update")) for r in runs)
    out["cycle1_total"] = statistics.median(sum(r[1].values()) for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="HEAD~1", help="git revision to compare with (default HEAD~1)")
    parser.add_argument("--current", help="git revision to measure (default: this working tree)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--out-json")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.cycles < 2:
        parser.error("--repeats >= 1 and --cycles >= 2 (warm cycles are cycle 2 and later)")
    workdir = tempfile.mkdtemp(prefix="deltacrawl-small-cycle-")
    base_tree = os.path.join(workdir, "baseline")
    cur_tree = os.path.join(workdir, "current") if args.current else REPO
    trees = [base_tree] + ([cur_tree] if args.current else [])
    try:
        rev = checkout(args.baseline, base_tree)
        cur_rev = checkout(args.current, cur_tree) if args.current else "working tree"
        runs: dict[str, list] = {"baseline": [], "current": []}
        for i in range(args.repeats):
            for name, tree in (("baseline", base_tree), ("current", cur_tree)):
                started = time.monotonic()
                runs[name].append(crawl_once(tree, args.cycles, args.hosts, workdir))
                print(f"repeat {i + 1} {name}: {time.monotonic() - started:.0f} s "
                      f"{runs[name][-1]}", file=sys.stderr, flush=True)
        base, cur = summarise(runs["baseline"]), summarise(runs["current"])
        result = {"machine": machine_facts(), "baseline": rev, "current": cur_rev, "args": vars(args), "runs": runs,
                  "baseline_s": base, "current_s": cur,
                  "ratio": {k: round(cur[k] / base[k], 3) if base[k] else None for k in cur}}

        def report(res):
            print(f"baseline {rev[:10]} vs {cur_rev[:10]}: median over {args.repeats} repeats, warm cycles "
                  f"(2..{args.cycles}), seconds")
            for key in (*STEPS, "outside_fetch", "cycle1_total"):
                print(f"  {key:14s} {base[key]:7.1f} {cur[key]:7.1f}   x{res['ratio'][key]}")
        return finish(result, [], args.out_json, report)
    except subprocess.CalledProcessError as exc:
        print(f"small_cycle: git {' '.join(exc.cmd[1:3])} failed: {(exc.stderr or '').strip()[:300]}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"small_cycle: {exc}", file=sys.stderr)
        return 1
    finally:
        for tree in trees:
            subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
