#!/usr/bin/env python
"""JVM options: what `spark.jvm_options` buys a step on this machine (conf/defaults.toml).

Run:      .venv/bin/python bench/jvm_options.py [--options "-XX:TieredStopAtLevel=1" ...]
          [--repeats 2] [--hosts 10] [--modes steps,crawl,scale] [--scale-urls 1000000] [--out-json FILE]
          .venv/bin/python bench/jvm_options.py --class-archive [--repeats 3] --modes steps
          .venv/bin/python bench/jvm_options.py --jit full,quick [--repeats 1] --modes scale
What:     the default (no extra options) and each --options set, alternating run by run, all with
          spark.jit = full (both JIT compilers, so that the options are the only difference); or,
          with --class-archive, the documented options without and with the driver's class archive
          (spark.class_data_sharing false / true; the archive is built first if there is none); or,
          with --jit, the documented options under each spark.jit mode named. In these shapes of
          work:
            steps  one crawl cycle as separate `deltacrawl` processes, each a cold JVM, as the
                   Airflow DAG runs them: inject, generate, fetch, dedup, update, stats over the
                   bundled test web (--hosts hosts, a fresh crawl root each run);
            crawl  `deltacrawl crawl --with-devweb --cycles 3` in one JVM (bench/small_cycle.py's
                   crawl): cycle 1 in all, and a warm cycle's generate + dedup + update;
            scale  bench/scale.py --sizes --scale-urls in one process and JVM: a synthetic crawl root
                   of that many URLs built, then generate, a made-up fetch, dedup, update and stats
                   of a 100,000-URL segment: what one long step over a big crawldb does.
          Seconds are wall-clock per process (steps, scale) or from the crawl's own cycle lines
          (crawl); steps and scale also count each process tree's CPU seconds (bench/cost.py's
          run_measured: the JVM and Python workers included), the figure least moved by a loaded
          machine.
Prints:   per shape, the median seconds of each set and its ratio to the first set's, which
          is the figure to read on this noisy machine.

Everything stays on loopback: the test web binds 127.0.x.y addresses only.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, DevWebProcess, finish, machine_facts  # noqa: E402
from cost import become_subreaper, run_measured  # noqa: E402
from small_cycle import crawl_once, summarise  # noqa: E402

STEPS = ("inject", "generate", "fetch", "dedup", "update", "stats")


def steps_once(confs: list[str], web: DevWebProcess, workdir: str) -> dict[str, float]:
    """One cycle as six cold `deltacrawl` processes with ``confs`` (key=value); {step: seconds,
    step + " cpu": CPU seconds of its process tree, "total", "total cpu"}."""
    root = tempfile.mkdtemp(prefix="steps-", dir=workdir)
    seeds = os.path.join(root, "seeds.txt")
    with open(seeds, "w") as fh:
        fh.write("\n".join(web.seeds) + "\n")
    common = ["--crawl-root", os.path.join(root, "crawl"), *(a for c in confs for a in ("--conf", c)),
              "--conf", "spark.master=local[2]", "--conf", "fetch.delay_s=0.2", "--mlflow-uri", "off",
              # the guard refuses loopback: allow exactly the devweb subprocess's addresses
              "--conf", "fetch.allow_networks=" + json.dumps(web.networks)]
    out: dict[str, float] = {}
    segment = None
    try:
        for step in STEPS:
            args = {"inject": [seeds], "generate": [], "stats": []}.get(step, [segment])
            run = run_measured([sys.executable, "-m", "jobs.cli", step, *common, *args], set(), 1800)
            out[step], out[f"{step} cpu"] = round(run["wall_s"], 2), round(run["cpu_s"], 2)
            if run["returncode"] != 0:
                raise RuntimeError(f"{step} with {confs} exited {run['returncode']}: {run['stderr_tail'][-1500:]}")
            if step == "generate":
                segment = run["stdout_tail"].strip().split()[-1]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["total"] = round(sum(out[s] for s in STEPS), 2)
    out["total cpu"] = round(sum(out[f"{s} cpu"] for s in STEPS), 2)
    return out


SCALE_STEPS = ("build", "generate", "dedup", "update", "stats")


def scale_once(confs: list[str], workdir: str, urls: int) -> dict[str, float]:
    """bench/scale.py at ``urls`` URLs with ``confs`` in one measured process tree: {step: its
    seconds, "total": wall seconds, "total cpu": CPU seconds of the whole tree}."""
    out_json = os.path.join(workdir, "scale.json")
    run = run_measured([sys.executable, os.path.join(REPO, "bench", "scale.py"), "--sizes", str(urls),
                        *(a for c in confs for a in ("--conf", c)), "--out-json", out_json], set(), 4 * 3600)
    if run["returncode"] != 0:
        raise RuntimeError(f"scale.py with {confs} exited {run['returncode']}: {run['stderr_tail'][-1500:]}")
    with open(out_json) as fh:
        (got,) = json.load(fh)["runs"]
    out = {"build": got["built"]["seconds"], **{s: got[f"{s}_s"] for s in SCALE_STEPS[1:]}}
    return {**out, "total": round(run["wall_s"], 2), "total cpu": round(run["cpu_s"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--options", action="append", default=[], metavar="JVM_OPTIONS",
                        help='an option set to compare with the default (default: "-XX:TieredStopAtLevel=1")')
    parser.add_argument("--class-archive", action="store_true",
                        help="compare spark.class_data_sharing false and true instead of JVM options")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--jit", metavar="MODES", help="compare these spark.jit modes (e.g. full,quick) instead")
    parser.add_argument("--modes", default="steps,crawl")
    parser.add_argument("--scale-urls", type=int, default=1_000_000, help="the crawldb's URLs in the scale mode")
    parser.add_argument("--out-json")
    args = parser.parse_args(argv)
    if args.class_archive:
        sets = {"no class archive": ["spark.class_data_sharing=false"],
                "class archive": ["spark.class_data_sharing=true"]}
        from crawl.config import build_config
        from jobs.engine.class_archive import ensure_archive
        ensure_archive(build_config())  # built before the runs, not inside the first one
    elif args.jit:
        sets = {f"jit {mode}": [f"spark.jit={mode}"] for mode in args.jit.split(",")}
    else:
        sets = {o or "default": ["spark.jit=full", f"spark.jvm_options={o}"]
                for o in ["", *(args.options or ["-XX:TieredStopAtLevel=1"])]}
    become_subreaper()
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= {"steps", "crawl", "scale"} or args.repeats < 1:
        parser.error("--modes is a list of steps, crawl and scale; --repeats >= 1")
    workdir = tempfile.mkdtemp(prefix="deltacrawl-jvm-options-")
    web = DevWebProcess(args.hosts, 8, os.path.join(workdir, "devweb.log")) if "steps" in modes else None
    runs: dict[str, dict[str, list]] = {mode: {s: [] for s in sets} for mode in modes}
    try:
        for i in range(args.repeats):
            for mode in modes:
                for name, confs in sets.items():
                    if mode == "steps":
                        run = steps_once(confs, web, workdir)
                    elif mode == "scale":
                        run = scale_once(confs, workdir, args.scale_urls)
                    else:
                        run = crawl_once(REPO, 3, args.hosts, workdir, tuple(confs))
                    runs[mode][name].append(run)
                    print(f"repeat {i + 1} {mode} {name!r}: {run}", file=sys.stderr, flush=True)
    except RuntimeError as exc:
        print(f"jvm_options: {exc}", file=sys.stderr)
        return 1
    finally:
        if web is not None:
            web.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        for name in sets:
            if mode in ("steps", "scale"):
                keys = ((*STEPS, "total", *(f"{s} cpu" for s in STEPS), "total cpu") if mode == "steps"
                        else (*SCALE_STEPS, "total", "total cpu"))
                med = {k: statistics.median(r[k] for r in runs[mode][name]) for k in keys}
            else:
                med = summarise(runs[mode][name])
            medians.setdefault(mode, {})[name] = med
    result = {"machine": machine_facts(), "args": vars(args), "runs": runs, "medians": medians}

    def report(res):
        for mode, by_set in res["medians"].items():
            first = next(iter(by_set))
            base = by_set[first]
            print(f"{mode}: median seconds over {args.repeats} repeats (ratio to {first!r})")
            for name, med in by_set.items():
                cells = "  ".join(f"{k} {v:.1f}" + (f" x{v / base[k]:.2f}" if name != first and base[k] else "")
                                  for k, v in med.items())
                print(f"  {name!r}: {cells}")
    return finish(result, [], args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
