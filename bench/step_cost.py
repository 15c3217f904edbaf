#!/usr/bin/env python
"""Fixed cost per step (issue 13, "report each step's fixed cost and what it is spent on").

Run:      .venv/bin/python bench/step_cost.py [--baseline REV] [--baseline-conf key=value ...]
          [--repeats 2] [--hosts 10] [--conf key=value ...] [--out-json FILE]
What:     builds a small crawl root on the bundled test web (inject, one whole cycle, then cycle
          2's generate and fetch), then times, on fresh copies of it, cycle 2's dedup and update,
          cycle 3's generate, stats, and a generate with nothing due: each step's seconds (what
          the crawl log shows), the Spark jobs it ran (a job group per step, read from the
          status tracker: the unit of Spark's fixed cost on small input) and the CPU seconds
          of the child's process tree (Python driver, JVM, Python workers: what the step costs
          the machine, whatever else runs on it).
          Each measurement is a child process with one SparkSession that first runs the same
          steps once on another copy (JIT and Delta's caches warm, as in cycle 2+ of
          `deltacrawl crawl`) and then the measured round.
          With --baseline REV, the same is done with REV's code (a temporary git worktree),
          alternating baseline and current child by child on the same crawl root, and the
          ratio current / baseline is printed: only same-run ratios compare on this noisy
          machine. --conf applies config overrides to every child, --baseline-conf to the
          baseline's only (without --baseline, this tree with those overrides is the baseline:
          a setting compared side by side).
Prints:   per step: median seconds, Spark jobs and CPU seconds (and the baseline's, and the
          ratios); the sum
          dedup + update + generate (a warm cycle's cost outside fetch; issue 13's target is
          15 s); machine facts.

Everything stays on loopback: the test web binds 127.0.x.y addresses only.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, devweb_networks, machine_facts  # noqa: E402
from small_cycle import checkout  # noqa: E402

if os.environ.get("STEP_COST_TREE"):  # a child measures that tree's code (the baseline's, say)
    sys.path.insert(0, os.environ["STEP_COST_TREE"])


def tree_cpu_s(root_pid: int | None = None) -> float:
    """User + system CPU seconds of ``root_pid`` (this process by default) and of every process
    below it now (the JVM, its Python workers), from /proc: what a step costs the machine, which
    a loaded machine's waits do not change (a process that ended between two readings is missed)."""
    root_pid = os.getpid() if root_pid is None else root_pid
    parent, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()  # after "(comm)": ppid = 1, utime, stime = 11, 12
        except (OSError, ValueError):
            continue
        parent[int(name)], cpu[int(name)] = int(rest[1]), (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid, seconds in cpu.items():
        p = pid
        while p and p != root_pid:
            p = parent.get(p, 0)
        if p == root_pid:
            total += seconds
    return total


def timed(spark, name: str, call):
    """(result, seconds, Spark jobs, CPU seconds of this process tree) of one step run in its own job group."""
    sc = spark.sparkContext
    group = f"bench-{name}-{time.monotonic_ns()}"
    sc.setJobGroup(group, name)
    cpu_before = tree_cpu_s()
    started = time.perf_counter()
    try:
        result = call()
    finally:
        seconds = time.perf_counter() - started
        cpu = tree_cpu_s() - cpu_before
        jobs = len(sc.statusTracker().getJobIdsForGroup(group))
        sc.setLocalProperty("spark.jobGroup.id", None)
    return result, seconds, jobs, cpu


STEPS = ("dedup", "update", "generate", "stats", "generate (nothing due)")


def child_build(base: str, hosts: int, overrides: dict[str, str]) -> None:
    """The crawl root every measurement copies: cycle 1 done, cycle 2 fetched."""
    from crawl.config import build_config
    from crawl.devweb.web import DevWeb
    from jobs import dedup, fetch, generate, inject, update
    from jobs.engine.session import build_spark
    from jobs.engine.crawl_root import CrawlRoot
    # the guard refuses loopback: allow exactly this web (only this child fetches, always with this
    # tree's code, so a --baseline from before fetch.allow_networks existed still runs)
    cfg = build_config(None, {"fetch.allow_networks": devweb_networks(hosts), **overrides})
    web = DevWeb(hosts=hosts, pages_per_host=int(cfg["devweb.pages_per_host"]), port=0,
                 seed=int(cfg["devweb.seed"]), crawl_delay_s=float(cfg["devweb.crawl_delay_s"]))
    web.start()
    try:
        seeds = base + "-seeds.txt"
        with open(seeds, "w") as fh:
            fh.writelines(u + "\n" for u in web.seed_urls())
        root = CrawlRoot(base)
        spark = build_spark(cfg, root.root)
        inject.run(spark, cfg, root, seeds)
        first = generate.run(spark, cfg, root).segment_id
        for module in (fetch, dedup, update):
            module.run(spark, cfg, root, first)
        second = generate.run(spark, cfg, root).segment_id
        fetch.run(spark, cfg, root, second)
        with open(os.path.join(base, "bench-segment"), "w") as fh:
            fh.write(second)
    finally:
        web.stop()


def child_measure(base: str, overrides: dict[str, str]) -> dict[str, tuple[float, int, float]]:
    """{step: (seconds, jobs, CPU seconds)} of the measured round, after a warm-up round."""
    import contextlib
    import io
    from crawl.config import build_config
    from jobs import dedup, generate, stats, update
    from jobs.engine.session import build_spark
    from jobs.engine.crawl_root import CrawlRoot
    cfg = build_config(None, overrides)
    segment = open(os.path.join(base, "bench-segment")).read().strip()
    spark = build_spark(cfg, base)
    out: dict[str, tuple[float, int, float]] = {}
    for round_ in ("warm-up", "measured"):
        root = CrawlRoot(f"{base}-{round_}")
        shutil.copytree(base, root.root)
        steps = (("dedup", lambda: dedup.run(spark, cfg, root, segment)),
                 ("update", lambda: update.run(spark, cfg, root, segment)),
                 ("generate", lambda: generate.run(spark, cfg, root)),
                 ("stats", lambda: stats.run(spark, cfg, root)),
                 ("generate (nothing due)", lambda: generate.run(spark, cfg, root)))
        for name, call in steps:
            with contextlib.redirect_stdout(io.StringIO()):  # stats prints its report
                _, seconds, jobs, cpu = timed(spark, name, call)
            out[name] = (seconds, jobs, cpu)
        shutil.rmtree(root.root, ignore_errors=True)
    return out


def run_child(tree: str, argv: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=tree, STEP_COST_TREE=tree)
    here = os.path.abspath(__file__)
    proc = subprocess.run([sys.executable, here, *argv], capture_output=True, text=True, env=env, cwd=tree,
                          timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"child {argv[:2]} with {tree} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--baseline", metavar="REV", help="git revision to compare with")
    ap.add_argument("--baseline-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="config overrides for the baseline's children only (without --baseline: this tree "
                         "with them is the baseline)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out-json")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "BASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    from crawl.config import parse_pairs
    overrides = parse_pairs(args.conf)
    if args.child:
        mode, base = args.child
        if mode == "build":
            child_build(base, args.hosts, overrides)
        else:
            print(json.dumps(child_measure(base, overrides)))
        return 0
    work = tempfile.mkdtemp(prefix="deltacrawl-stepcost-")
    conf_args = [a for item in args.conf for a in ("--conf", item)]
    child_conf = {"current": conf_args, "baseline": conf_args + [a for item in args.baseline_conf
                                                                  for a in ("--conf", item)]}
    trees = {"current": REPO}
    try:
        if args.baseline:
            trees = {"baseline": os.path.join(work, "baseline-tree"), "current": REPO}
            rev = checkout(args.baseline, trees["baseline"])
        elif args.baseline_conf:
            trees = {"baseline": REPO, "current": REPO}
            rev = "this tree with " + " ".join(args.baseline_conf)
        base = os.path.join(work, "base")
        run_child(REPO, ["--child", "build", base, "--hosts", str(args.hosts), *conf_args])
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for repeat in range(args.repeats):
            for name, tree in trees.items():
                runs[name].append(json.loads(run_child(tree, ["--child", "measure", base, *child_conf[name]])
                                             .splitlines()[-1]))
                print(f"repeat {repeat + 1} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
        # per step: median seconds, Spark jobs and CPU seconds (a child from before CPU was
        # measured has none)
        medians = {name: {step: tuple(statistics.median(r[step][i] for r in rs) if len(rs[0][step]) > i else None
                                      for i in range(3)) for step in STEPS} for name, rs in runs.items()}
        warm = {name: sum(m[s][0] for s in ("dedup", "update", "generate")) for name, m in medians.items()}
        warm_cpu = {name: sum(m[s][2] for s in ("dedup", "update", "generate")) for name, m in medians.items()}
        report = {"machine": machine_facts(), "overrides": overrides, "baseline_overrides": args.baseline_conf,
                  "hosts": args.hosts, "runs": runs, "median_s_jobs_cpu": medians,
                  "warm_cycle_outside_fetch_s": warm, "warm_cycle_outside_fetch_cpu_s": warm_cpu}
        if args.baseline or args.baseline_conf:
            report["baseline"] = rev
        names = list(trees)
        print(f"median of {args.repeats}: seconds (Spark jobs) [CPU seconds of the process tree]"
              + (f"; baseline {rev[:40]}" if len(names) == 2 else ""))
        print(f"{'step':24s}" + "".join(f"{n:>24s}" for n in names) + ("   ratio  CPU ratio" if len(names) == 2 else ""))

        def ratio(i: int, step: str) -> str:
            return f"x{medians['current'][step][i] / medians['baseline'][step][i]:.2f}"

        for step in STEPS:
            cells = "".join(f"{medians[n][step][0]:9.2f} ({medians[n][step][1]:3.0f}) [{medians[n][step][2]:6.2f}]"
                            for n in names)
            print(f"{step:24s}{cells}" + (f"   {ratio(0, step)}   {ratio(2, step)}" if len(names) == 2 else ""))
        print(f"{'outside fetch (d+u+g)':24s}" + "".join(f"{warm[n]:9.2f}       [{warm_cpu[n]:6.2f}]" for n in names)
              + (f"   x{warm['current'] / warm['baseline']:.2f}   x{warm_cpu['current'] / warm_cpu['baseline']:.2f}"
                 if len(names) == 2 else "") + "   (target <= 15 s)")
        print(json.dumps(report["machine"]))
        if args.out_json:
            with open(args.out_json, "w") as fh:
                json.dump(report, fh, indent=2)
        return 0
    except RuntimeError as exc:
        print(f"step_cost: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.baseline and not args.child:  # (a --baseline-conf run's baseline is this tree)
            subprocess.run(["git", "worktree", "remove", "--force", trees["baseline"]], cwd=REPO, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
