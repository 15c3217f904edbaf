#!/usr/bin/env python
"""Cost per page on a realistic web (issue 33): CPU seconds of every crawler's whole process tree.

Run:      PYTHONPATH=. .venv/bin/python bench/cost.py [--hosts 1000 --pages 30 --seed 1]
          [--scrapy-python /work/.bench-venv-scrapy/bin/python] [--methods floor,scrapy,steps,crawl,profile,nutch]
          [--nutch-home /work/.nutch-build/runtime/local] [--profile-top 25] [--out-json F] [--keep]
          (--hosts 100 is the quick mode: 3,000 URLs, a few minutes)
What:     bench/_realistic_web.py serves hosts x pages realistic pages (lognormal ~50 KB bodies with
          real structure, gzip, ~100 anchors a page, 3 % 404, 2 % 301, robots.txt per host) from its
          own process on loopback (127.0.0.2 ..; its CPU is never counted). On the same URLs, one
          after the other:
            floor     bare aiohttp + gzip + selectolax link extraction (bench/_common.py raw_fetch with
                      crawl.parse.links.extract_outlinks; one request in flight per host, cap
                      fetch.max_concurrency; no robots.txt, nothing stored), in a fresh interpreter;
            scrapy    Scrapy 2.19 + LinkExtractor, nothing stored (bench/_scrapy_fetch.py), run by
                      --scrapy-python (its own venv: Scrapy is no crawler dependency);
            deltacrawl inject (every page URL), generate (one segment holding all of them:
                      generate.max_urls_per_host = pages, generate.top_n >= URLs), fetch
                      (fetch.delay_s = fetch.delay_factor = 0; robots, WARC, isolated parse, links,
                      fingerprints as configured), dedup, update: each `python -m jobs.cli <step>`
                      its own process, as an Airflow task runs it;
            crawl     `python -m jobs.cli crawl --seeds --cycles 1` with the same options (tracking off
                      too): inject and generate, fetch, dedup, update of one cycle (then stats, as every
                      crawl ends) in ONE process, one JVM and SparkSession, into a crawl root of its own:
                      the whole cycle as `deltacrawl crawl` pays it, its fixed JVM/Spark/Delta set-up once.
            nutch     Apache Nutch 1.22, local mode (--nutch-home; bench/build_nutch.sh builds it; missing:
                      skipped): bin/nutch inject, generate (-topN >= URLs, no per-host cap), fetch
                      (-threads fetch.max_concurrency, fetcher.threads.per.queue 1, fetcher.server.delay 0,
                      robots.txt obeyed, redirects not followed), parse (parse-html), updatedb: each its
                      own process, with a conf directory of its own in the work directory whose URL
                      filter lets through only the web's 127.x.y.z:port URLs.
          Each method's CPU is user + sys of its whole process tree: this process is a child
          subreaper (prctl PR_SET_CHILD_SUBREAPER), so descendants that outlive their parent (a
          JVM, daemonised Spark Python workers, a forkserver) are re-parented here and reaped by
          it; RUSAGE_CHILDREN's growth over the method then counts every descendant that was
          waited for. pyspark's daemon ignores SIGCHLD, so the kernel reaps its forked workers and
          their CPU (with their own children's) reaches nobody: a /proc sampler (every 0.2 s) of
          the tree adds their last reading -- except for a worker that outlived the daemon (it
          SIGHUPs its process group and exits at once), which was re-parented here and reaped with
          its CPU in the rusage (bench/tests/test_cost_tree_cpu.py). The sampler also cross-checks the total (its sum of
          every process's own CPU may fall short by each process's last interval, never exceed it)
          and splits the CPU by process kind (JVM, Spark Python workers, driver, parser children). Divided by the page URLs the web answered
          for that method (200 + 301 + 404), it is robust to a loaded machine.
          Then, unless --profile-top 0, on the first --profile-hosts hosts' URLs: the fetch step's
          task body (jobs.fetch.fetch_task without Spark, as configured) once unprofiled (the
          per-page figure to compare a change to it by: cProfile slows Python code more than C
          calls), then under cProfile (CPU clock) with parse.isolate on (the parser children's CPU
          measured apart, from the tree) and once more with it off, so the parse functions show in
          the same profile.
Checks:   every method's page requests = URLs and its 200/301/404 counts = the web's own; robots.txt
          once per host for Scrapy and deltacrawl; no host ever had two requests in flight; no
          response went out uncompressed; inject took every URL as new and generate put all of them
          in one segment (their end lines on stderr); the segment's fetch_status counts = the web's
          (for crawl also: its only segment, the same outlinks as the steps'); for Nutch its
          injector's count, readseg -list (generated = URLs, fetched = URLs + 301 targets, parsed = the 200s) and
          readdb -stats (fetched / redir_perm / gone = the web's 200 / 301 / 404); the tree's rusage
          is not below what the sampler saw (nothing escaped).
Exit:     0 done · 1 a check failed (figures still printed/written) · 2 bad arguments.

Loopback only: the web binds 127.0.x.y; fetch.allow_networks allows exactly its addresses.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, bench/_realistic_web.py
from _common import REPO, Checker, fmt, machine_facts, run_in_workdir  # noqa: E402

DEFAULT_SCRAPY_PYTHON = "/work/.bench-venv-scrapy/bin/python"
DEFAULT_NUTCH_HOME = "/work/.nutch-build/runtime/local"  # bench/build_nutch.sh builds it
STEPS = ("inject", "generate", "fetch", "dedup", "update")
NUTCH_STEPS = ("inject", "generate", "fetch", "parse", "updatedb")
_TICK = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36


# =========================================================================== process-tree CPU

def become_subreaper() -> bool:
    """Orphaned descendants re-parent to this process instead of init, so their CPU reaches our
    RUSAGE_CHILDREN when we reap them (Linux >= 3.4)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")  # children hang off the thread that forked them
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                kids += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return kids


def _descendants(pid: int, skip: set[int]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for kid in _children(todo.pop()):
            if kid not in skip:
                out.append(kid)
                todo.append(kid)
    return out


def _proc_cpu(pid: int) -> tuple[str, int, float, float] | None:
    """(start time, parent pid, own user + sys seconds, reaped children's user + sys seconds) of a
    live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (rest[19], int(rest[1]), (int(rest[11]) + int(rest[12])) / _TICK,
            (int(rest[13]) + int(rest[14])) / _TICK)


def _ignores_sigchld(pid: int) -> bool:
    """True if ``pid`` has SIGCHLD set to SIG_IGN: its children are reaped by the kernel, and their
    CPU (with their own reaped children's) never reaches anyone's RUSAGE_CHILDREN. pyspark's
    daemon does this to its forked workers."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGCHLD - 1)))
    except OSError:
        pass
    return False


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if not cmd:  # a zombie (ended, not reaped yet) or a kernel thread: no command line to name it by
        return "gone"
    if "java" in cmd.split(" ", 1)[0] or "org.apache.spark" in cmd:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "spark_python_workers"
    if "multiprocessing" in cmd or "forkserver" in cmd:
        return "parser_children"
    if "scrapy" in cmd or "_scrapy_fetch" in cmd:
        return "scrapy"
    if "jobs.cli" in cmd or "cost.py" in cmd:
        return "driver"
    return "other:" + os.path.basename(cmd.split(" ", 1)[0])


SAMPLE_S = 0.2  # the /proc sampler's period (--sample-s)


def run_measured(cmd: list[str], keep_pids: set[int], timeout_s: float, env: dict[str, str] | None = None,
                 stderr_path: str | None = None) -> dict[str, Any]:
    """Run ``cmd`` and return the CPU of its whole process tree (see the module docstring);
    ``stderr_path``: also keep its whole stderr there (the result holds only its tail)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    samples: dict[tuple[int, str], dict[str, Any]] = {}
    stop = threading.Event()
    me = os.getpid()

    def sample() -> None:
        while True:
            for pid in _descendants(me, keep_pids):
                got = _proc_cpu(pid)
                if got is None:
                    continue
                key = (pid, got[0])
                entry = samples.get(key)
                if entry is None:
                    entry = samples[key] = {"kind": "gone", "autoreaped": _ignores_sigchld(got[1])}
                # named by its latest command line: a fork seen before its exec (the driver's
                # spark-submit becoming the JVM) keeps its pid and start time, not its command line
                kind = _kind(pid)
                if kind != "gone":
                    entry["kind"] = kind
                entry["cpu_s"], entry["children_cpu_s"] = got[2], got[3]
            if stop.wait(SAMPLE_S):
                return

    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    keep_pids = set(keep_pids)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    if stderr_path:
        with open(stderr_path, "w", encoding="utf-8") as fh:
            fh.write(stderr)
    # Reap what outlived the child (re-parented to us): wait for it to end by itself, then end it.
    leftovers: list[dict[str, Any]] = []
    # Processes reaped here, keyed as the sampler keys them: a worker of a SIGCHLD-ignoring parent
    # that outlived that parent (pyspark's daemon SIGHUPs its process group and exits, racing its
    # workers' exits) was re-parented to us, so its CPU reached our rusage after all.
    reaped_here: set[tuple[int, str]] = set()
    deadline = time.monotonic() + 60
    while True:
        alive = [p for p in _children(me) if p not in keep_pids]
        for pid in alive:
            got = _proc_cpu(pid)  # a zombie's /proc/<pid>/stat still names its start time
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done and got is not None:
                reaped_here.add((pid, got[0]))
        alive = [p for p in _children(me) if p not in keep_pids and _proc_cpu(p) is not None]
        if not alive:
            break
        if time.monotonic() > deadline:
            for pid in alive:
                leftovers.append({"pid": pid, "kind": _kind(pid)})
                os.kill(pid, signal.SIGTERM)  # a process this method started, by its id
            deadline = time.monotonic() + 30
        time.sleep(0.2)
    stop.set()
    sampler.join()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, sys_ = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    by_kind: Counter = Counter()
    for entry in samples.values():
        by_kind[entry["kind"]] += entry["cpu_s"]
    # Children of a SIGCHLD-ignoring parent are reaped by the kernel: their CPU and their reaped
    # descendants' never reach RUSAGE_CHILDREN, so the sampler's last reading of them is added --
    # unless the parent died first and we reaped the child ourselves (then rusage has it: adding
    # it again counted a whole Spark Python worker twice, issue 33's "unexplained" 1.25 ms/page).
    autoreaped = sum(e["cpu_s"] + e["children_cpu_s"] for key, e in samples.items()
                     if e["autoreaped"] and key not in reaped_here)
    reaped_after_parent = sum(e["cpu_s"] + e["children_cpu_s"] for key, e in samples.items()
                              if e["autoreaped"] and key in reaped_here)
    return {"cmd": " ".join(cmd), "returncode": proc.returncode, "wall_s": wall,
            "cpu_s": user + sys_ + autoreaped, "rusage_cpu_s": user + sys_, "autoreaped_cpu_s": autoreaped,
            "orphaned_autoreaped_cpu_s": reaped_after_parent,
            "user_s": user, "sys_s": sys_, "sampled_cpu_s": sum(by_kind.values()),
            "sampled_by_kind_s": {k: round(v, 2) for k, v in by_kind.most_common()},
            "processes_seen": len(samples), "leftovers_killed": leftovers,
            "stdout_tail": stdout[-2000:], "stderr_tail": stderr[-3000:]}


# =========================================================================== children (fresh interpreters)

def floor_child(job_path: str, out_path: str) -> int:
    """``--floor-child JOB OUT``: bare aiohttp + gzip + selectolax links over the job's URLs."""
    from _common import raw_fetch
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    t = time.process_time()
    out = raw_fetch(job["urls"], job["concurrency"], job["user_agent"], tuple(job["timeouts"]), job["max_outlinks"],
                    job.get("ca_file"))
    out["process_cpu_s"] = time.process_time() - t
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


class _Row(dict):
    """A fetchlist row that looks like a pyspark Row to jobs.fetch.fetch_task (``asDict``)."""
    def asDict(self) -> dict[str, Any]:  # noqa: N802 (pyspark's spelling)
        return dict(self)


def profile_child(job_path: str, out_path: str) -> int:
    """``--profile-child JOB OUT``: jobs.fetch.fetch_task (a Spark task's body, no Spark) over the
    job's URLs under cProfile; this process's top functions by own time, and its CPU."""
    import cProfile
    import pstats

    import jobs.fetch as fetch_step
    from _common import fetch_rows
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    cfg = job["cfg"]
    rows = fetch_rows(job["urls"], "bench-cost")
    names = fetch_step.FETCHED_SCHEMA.fieldNames()
    status_at, outlinks_at = names.index("fetch_status"), names.index("outlinks")
    pairs = ((r["host"], _Row(r)) for r in rows)
    profiler = cProfile.Profile(time.process_time)  # CPU, not wall: waiting in epoll costs nothing
    profiled = job.get("profile", True)
    cpu0 = time.process_time()
    if profiled:
        profiler.enable()
    out = list(fetch_step.fetch_task(0, pairs, cfg, fetch_step.FetchRun("bench", job["warc_dir"], None)))
    if profiled:
        profiler.disable()
    cpu = time.process_time() - cpu0
    urls = [t for t in out if t[names.index("kind")] == "url"]
    funcs = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in (pstats.Stats(profiler).stats.items() if profiled else ()):
        funcs.append({"function": f"{os.path.relpath(file, REPO) if file.startswith(REPO) else os.path.basename(file)}"
                                  f":{line}({func})", "calls": nc, "own_s": round(tt, 3), "cumulative_s": round(ct, 3)})
    by_own = sorted(funcs, key=lambda r: -r["own_s"])[:job["top"]]
    by_cum = sorted(funcs, key=lambda r: -r["cumulative_s"])[:job["top"]]
    warc_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(job["warc_dir"] or "/nonexistent")
                     for f in fs)
    result = {"urls": len(urls), "by_fetch_status": dict(Counter(t[status_at] for t in urls)), "warc_bytes": warc_bytes,
              "outlinks": sum(len(t[outlinks_at] or ()) for t in urls), "process_cpu_s": cpu,
              "profiled_total_s": round(sum(f["own_s"] for f in funcs), 2), "top_own": by_own, "top_cumulative": by_cum}
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


# =========================================================================== the benchmark

def conf_args(over: dict[str, Any]) -> list[str]:
    out = []
    for k, v in over.items():
        out += ["--conf", f"{k}={json.dumps(v) if isinstance(v, list) else v}"]
    return out


def crawl_inputs(args: Any, web: Any, folder: str, res: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> tuple[list[str], Any, int, str, dict[str, Any]]:
    """The web's page URLs and expected statuses (noted in ``res``), its seeds file in ``folder``, and
    the crawler's overrides: no politeness gap on this private web, every page in one cycle, the web's
    networks allowed, ``extra``, then --conf."""
    urls = web.web.page_urls()
    expected = web.web.expected_statuses()
    n = len(urls)
    res["urls"], res["expected_statuses"] = n, expected
    seeds = os.path.join(folder, "seeds.txt")
    with open(seeds, "w", encoding="utf-8") as fh:
        fh.writelines(u + "\n" for u in urls)
    over = {"fetch.delay_s": 0, "fetch.delay_factor": 0, "generate.max_urls_per_host": args.pages,
            "generate.top_n": max(n, 30_000), "fetch.allow_networks": web.networks(),
            "spark.master": "local[2]", **(extra or {})}
    for kv in args.conf:
        k, v = kv.split("=", 1)
        over[k] = v
    return urls, expected, n, seeds, over


def recorder(web, methods: dict[str, dict[str, Any]], check: Checker, expected: dict[str, int], hosts: int,
             tag: str = ""):
    """``record(name, run)``: the web's counters since the last one (reset) into ``run`` (its pages,
    CPU per page), ``run`` into ``methods``, a line printed, the checks every method passes; and
    ``check_pages(name, run, robots)``: the web answered every page URL as expected (and robots.txt
    once per host)."""
    def record(name: str, run: dict[str, Any], counted: bool = True) -> dict[str, Any]:
        seen = web.counters(reset=True)
        run["web"] = seen
        pages = sum(seen["page_status"].values())
        run["pages"] = pages
        if counted:
            run["cpu_ms_per_page"] = run["cpu_s"] / pages * 1e3 if pages else None
        methods[name] = run
        print(f"cost: {tag}{name:9s} cpu {run['cpu_s']:8.1f} s (sampled {run['sampled_cpu_s']:.1f}) wall "
              f"{run['wall_s']:7.1f} s  pages {pages:,}  {fmt(run.get('cpu_ms_per_page'), 2)} ms/page  "
              f"connections {seen.get('connections')}  kinds {run['sampled_by_kind_s']}", flush=True)
        check(run["returncode"] == 0, f"{tag}{name}: exit code {run['returncode']}"
              + ("" if run["returncode"] == 0 else f"; stderr: {run['stderr_tail'][-800:]}"))
        check(run["cpu_s"] + 0.5 >= run["sampled_cpu_s"] * 0.99,
              f"{tag}{name}: tree CPU {run['cpu_s']:.1f} s (rusage {run['rusage_cpu_s']:.1f} + kernel-reaped "
              f"{run['autoreaped_cpu_s']:.1f}) >= sampled {run['sampled_cpu_s']:.1f} s (nothing escaped)")
        check(not run["leftovers_killed"], f"{tag}{name}: no process outlived the method ({run['leftovers_killed']})")
        check(seen["max_in_flight_per_host"] <= 1,
              f"{tag}{name}: at most one request in flight per host (saw {seen['max_in_flight_per_host']})")
        check(seen["not_gzip"] == 0, f"{tag}{name}: every page sent gzip-compressed ({seen['not_gzip']} not)")
        return run

    def check_pages(name: str, run: dict[str, Any], robots: bool) -> None:
        seen = run["web"]
        check(seen["page_status"] == expected,
              f"{tag}{name}: web answered {seen['page_status']} page requests, expected {expected}")
        if robots:
            check(seen["robots"] == hosts, f"{tag}{name}: robots.txt {seen['robots']} times, expected {hosts}")

    return record, check_pages


def bench(args, workdir: str, check: Checker) -> dict[str, Any]:
    from _realistic_web import RealisticWebProcess

    from crawl.config import build_config
    res: dict[str, Any] = {"params": {"hosts": args.hosts, "pages": args.pages, "seed": args.seed}}
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"cost: generating and compressing {args.hosts * args.pages:,} pages in the web's process", flush=True)
    t = time.perf_counter()
    web = RealisticWebProcess(args.hosts, args.pages, args.seed, os.path.join(workdir, "web.stderr"))
    res["web"] = {"start_s": time.perf_counter() - t, "port": web.port, "pid": web.pid, **web.sizes,
                  "networks": web.networks()}
    keep = {web.pid}
    try:
        urls, expected, n, seeds, over = crawl_inputs(args, web, workdir, res)
        cfg = build_config(overrides=over)
        res["config"] = {k: cfg[k] for k in ("fetch.max_concurrency", "fetch.tasks", "warc.enabled", "warc.gzip_level",
                                             "parse.isolate", "parse.workers", "sitemaps.enabled", "spark.master",
                                             "parse.max_outlinks")}
        concurrency = int(cfg["fetch.max_concurrency"])
        methods: dict[str, dict[str, Any]] = {}
        web.counters(reset=True)
        record, check_pages = recorder(web, methods, check, expected, args.hosts)

        want = set(args.methods.split(","))
        # ---- (a) the floor
        if "floor" in want:
            floor_method(args, workdir, urls, cfg, concurrency, keep, env, record, check_pages, check, expected)

        # ---- (b) Scrapy
        if "scrapy" in want:
            scrapy_method(args, workdir, urls, cfg, concurrency, keep, record, check_pages, res)

        # ---- (c) deltacrawl, one process per step
        if "steps" in want:
            steps_method(args, workdir, seeds, over, keep, env, record, check_pages, check, expected, methods, res)

        # ---- (d) deltacrawl crawl: inject and one cycle in one process (one JVM, one SparkSession)
        if "crawl" in want:
            crawl_method(args, workdir, seeds, over, keep, env, record, check_pages, check, expected, n, methods, res)

        # ---- (e) Apache Nutch 1.22, local mode: one bin/nutch process per step
        if "nutch" in want:
            nutch_method(args, workdir, urls, web, concurrency, keep, record, check_pages, check, expected,
                         methods, res)
        res["methods"] = methods
        floor = methods.get("floor", {}).get("cpu_ms_per_page")
        res["ratio_to_floor"] = {k: v["cpu_ms_per_page"] / floor for k, v in methods.items()
                                 if floor and v.get("cpu_ms_per_page") is not None}

        # ---- the fetch step's profile: its task body in one process, parse isolated and not
        if "profile" in want and args.profile_top:
            profile_method(args, workdir, urls, cfg, keep, env, record, check, web, methods, res)
    finally:
        web.stop()
    return res


def floor_method(args, workdir, urls, cfg, concurrency, keep, env, record, check_pages, check, expected) -> None:
    job = os.path.join(workdir, "floor.json")
    with open(job, "w", encoding="utf-8") as fh:
        json.dump({"urls": urls, "concurrency": concurrency, "user_agent": cfg["fetch.user_agent"],
                   "timeouts": [float(cfg["fetch.total_timeout_s"]), float(cfg["fetch.connect_timeout_s"]),
                                float(cfg["fetch.read_timeout_s"])],
                   "max_outlinks": int(cfg["parse.max_outlinks"]), "ca_file": cfg["fetch.tls_ca_file"] or None}, fh)
    out = os.path.join(workdir, "floor-out.json")
    run = run_measured([sys.executable, os.path.abspath(__file__), "--floor-child", job, out], keep,
                       args.timeout_s, env)
    if os.path.exists(out):
        with open(out, encoding="utf-8") as fh:
            run["result"] = json.load(fh)
    record("floor", run)
    check_pages("floor", run, robots=False)
    if "result" in run:
        check(run["result"]["statuses"] == expected, f"floor: client statuses {run['result']['statuses']}")



def scrapy_method(args, workdir, urls, cfg, concurrency, keep, record, check_pages, res) -> None:
    n = len(urls)
    if os.path.exists(args.scrapy_python):
        rr = os.path.join(workdir, "scrapy-urls.txt")
        with open(rr, "w", encoding="utf-8") as fh:  # hosts interleaved, as bench/fetch.py feeds Scrapy
            per_host = [urls[i:i + args.pages] for i in range(0, n, args.pages)]
            fh.writelines(h[k] + "\n" for k in range(args.pages) for h in per_host)
        out = os.path.join(workdir, "scrapy-out.json")
        run = run_measured([args.scrapy_python, os.path.join(REPO, "bench", "_scrapy_fetch.py"), "--urls", rr,
                            "--concurrency", str(concurrency), "--user-agent", cfg["fetch.user_agent"],
                            "--out-json", out], keep, args.timeout_s)
        if os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                run["result"] = json.load(fh)
        record("scrapy", run)
        check_pages("scrapy", run, robots=True)
    else:
        print(f"cost: SKIPPED Scrapy: no interpreter at {args.scrapy_python}. Create it with "
              f"`python3 -m venv /work/.bench-venv-scrapy && /work/.bench-venv-scrapy/bin/pip install "
              f"scrapy==2.19.0` (or pass --scrapy-python)", flush=True)
        res["scrapy_skipped"] = args.scrapy_python



def nutch_conf(home: str, conf_dir: str, workdir: str, port: int, threads: int, user_agent: str) -> dict[str, str]:
    """A conf directory of its own for the Nutch runs (a copy of the runtime's, never edited in
    place): nutch-site.xml with the politeness and plugins of the other methods, and a URL filter
    that lets through nothing but the web's loopback hosts."""
    shutil.copytree(os.path.join(home, "conf"), conf_dir)
    props = {
        "http.agent.name": user_agent,
        # protocol-http (protocol-okhttp is not built: bench/build_nutch.sh); only what a fetch,
        # parse and updatedb of HTML pages needs -- no indexing, no Tika
        "plugin.includes": "protocol-http|urlfilter-regex|parse-html|scoring-opic|urlnormalizer-(pass|regex|basic)",
        "plugin.folders": os.path.join(home, "plugins"),
        # politeness as the other methods: one request in flight per host, no delay, robots.txt obeyed
        # (Nutch always reads it), redirects recorded, not followed (the floor and Scrapy do not follow)
        "fetcher.threads.fetch": str(threads),
        "fetcher.threads.per.queue": "1",
        "fetcher.queue.mode": "byHost",
        "fetcher.server.delay": "0.0",
        "fetcher.server.min.delay": "0.0",
        "fetcher.parse": "false",
        "http.redirect.max": "0",
        # generate: no per-host cap (the default, -1), every injected URL due
        "generate.max.count": "-1",
        "hadoop.tmp.dir": os.path.join(workdir, "nutch-tmp"),
    }
    with open(os.path.join(conf_dir, "nutch-site.xml"), "w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0"?>\n<configuration>\n')
        for k, v in props.items():
            fh.write(f"  <property><name>{k}</name><value>{escape(v)}</value></property>\n")
        fh.write("</configuration>\n")
    # loopback only: the web's hosts (127.x.y.z on its port), never 127.0.0.1 (its counters), nothing else
    with open(os.path.join(conf_dir, "regex-urlfilter.txt"), "w", encoding="utf-8") as fh:
        fh.write(f"-^http://127\\.0\\.0\\.1[:/]\n+^http://127\\.\\d{{1,3}}\\.\\d{{1,3}}\\.\\d{{1,3}}:{port}/\n-.\n")
    return props


def _java_home() -> str:
    """$JAVA_HOME, else the home of the java Spark would start (bin/nutch needs JAVA_HOME)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    from jobs.engine.class_archive import java_binary
    java = java_binary()
    return os.path.dirname(os.path.dirname(java)) if java else ""


def _nutch_stats(text: str) -> dict[str, int]:
    """``readdb -stats`` / ``readseg -list`` output -> {name: count}."""
    out: dict[str, int] = {}
    for m in re.finditer(r"(TOTAL urls|status \d+ \((\w+)\)):\s+(\d+)\s*$", text, re.M):
        out[m[2] or m[1]] = int(m[3])
    return out


def nutch_method(args, workdir, urls, web, threads, keep, record, check_pages, check, expected, methods,
                 res) -> None:
    """Apache Nutch 1.22 in local mode on the same URLs: inject, generate, fetch, parse, updatedb,
    each its own ``bin/nutch`` process, measured as a step of ours is. Divided by the page URLs
    the web answered in the fetch step."""
    home = os.path.abspath(args.nutch_home)
    nutch = os.path.join(home, "bin", "nutch")
    if not os.access(nutch, os.X_OK) or not os.path.isdir(os.path.join(home, "plugins", "protocol-http")):
        print(f"cost: SKIPPED Nutch: no Nutch 1.22 local runtime at {home} (bin/nutch, plugins/protocol-http). "
              f"Build it with `bench/build_nutch.sh` (or pass --nutch-home)", flush=True)
        res["nutch_skipped"] = home
        return
    n = len(urls)
    base = os.path.join(workdir, "nutch")
    conf = os.path.join(base, "conf")
    logs = os.path.join(base, "logs")
    seeds = os.path.join(base, "seeds")
    crawldb, segments = os.path.join(base, "crawldb"), os.path.join(base, "segments")
    os.makedirs(seeds)
    os.makedirs(logs)
    with open(os.path.join(seeds, "seeds.txt"), "w", encoding="utf-8") as fh:
        fh.writelines(u + "\n" for u in urls)
    res["nutch_conf"] = nutch_conf(home, conf, workdir, web.port, threads, "deltacrawl-bench-nutch")
    env = dict(os.environ, JAVA_HOME=_java_home(), NUTCH_CONF_DIR=conf, NUTCH_LOG_DIR=logs)
    for k in ("NUTCH_OPTS", "NUTCH_HEAPSIZE", "HADOOP_CONF_DIR"):  # Nutch's defaults (heap 4 GB)
        env.pop(k, None)

    def helper(*cmd: str) -> str:  # not measured: reading Nutch's own counts
        done = subprocess.run([nutch, *cmd], env=env, cwd=base, capture_output=True, text=True,
                              timeout=args.timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"nutch {' '.join(cmd)} failed: {done.stderr[-1500:]}")
        return done.stdout + done.stderr

    segment = None
    for step in NUTCH_STEPS:
        if step == "inject":
            extra = [crawldb, seeds]
        elif step == "generate":
            extra = [crawldb, segments, "-topN", str(max(n, 30_000)), "-numFetchers", "1"]
        elif step == "fetch":
            extra = [segment, "-threads", str(threads)]
        elif step == "parse":
            extra = [segment]
        else:
            extra = [crawldb, segment]
        run = run_measured([nutch, step, *extra], keep, args.timeout_s, env,
                           stderr_path=os.path.join(base, f"{step}.stderr"))
        record(f"nutch_{step}", run, counted=False)
        if run["returncode"] != 0:
            raise RuntimeError(f"nutch {step} failed: {run['stderr_tail'][-1500:]} {run['stdout_tail'][-1500:]}")
        if step == "generate":
            made = sorted(os.listdir(segments)) if os.path.isdir(segments) else []
            check(len(made) == 1, f"nutch: generate made one segment ({made})")
            if not made:
                raise RuntimeError("nutch: generate made no segment")
            segment = os.path.join(segments, made[-1])
        if step == "fetch":
            check_pages("nutch_fetch", run, robots=True)
    fetched = methods["nutch_fetch"]["pages"]
    for step in NUTCH_STEPS:
        methods[f"nutch_{step}"]["cpu_ms_per_page"] = (methods[f"nutch_{step}"]["cpu_s"] / fetched * 1e3
                                                       if fetched else None)
    cycle = sum(methods[f"nutch_{s}"]["cpu_s"] for s in NUTCH_STEPS)
    methods["nutch_cycle"] = {"cpu_s": cycle, "cpu_ms_per_page": cycle / fetched * 1e3 if fetched else None,
                              "wall_s": sum(methods[f"nutch_{s}"]["wall_s"] for s in NUTCH_STEPS)}
    # Nutch's own counts: the injector's log line, the segment's lists, the CrawlDb's statuses
    log_text = ""
    for f in sorted(os.listdir(logs)):
        with open(os.path.join(logs, f), encoding="utf-8", errors="replace") as fh:
            log_text += fh.read()
    inj = re.search(r"Injector: Total new urls injected: (\d+)", log_text)
    check(bool(inj) and int(inj[1]) == n, f"nutch: inject took all {n:,} URLs as new ({inj[0] if inj else 'no line'})")
    seg = re.search(r"^\S+\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(\d+)\s*$",
                    helper("readseg", "-list", segment).split("NAME", 1)[-1], re.M)
    listed = {"generated": int(seg[1]), "fetched": int(seg[2]), "parsed": int(seg[3])} if seg else {}
    db = _nutch_stats(helper("readdb", crawldb, "-stats"))
    res["nutch"] = {"segment": os.path.basename(segment), "readseg_list": listed, "readdb_stats": db}
    # crawl_fetch holds a row per URL fetched and, with http.redirect.max 0, one "linked" row per 301's target
    check(listed.get("generated") == n and listed.get("fetched") == n + expected["301"],
          f"nutch: the segment's generate list holds all {n:,} URLs and its fetch list those and the "
          f"{expected['301']} redirect targets ({listed})")
    check(listed.get("parsed") == expected["200"],
          f"nutch: parsed {listed.get('parsed')} pages, the web's 200s {expected['200']}")
    check((db.get("db_fetched"), db.get("db_redir_perm"), db.get("db_gone")) ==
          (expected["200"], expected["301"], expected["404"]),
          f"nutch: crawldb fetched/redir_perm/gone {db.get('db_fetched')}/{db.get('db_redir_perm')}/"
          f"{db.get('db_gone')} = the web's 200/301/404 {expected['200']}/{expected['301']}/{expected['404']}")
    print(f"cost: nutch     whole cycle cpu {cycle:8.1f} s  {fmt(methods['nutch_cycle']['cpu_ms_per_page'], 2)} "
          f"ms/page; readseg -list {listed}; crawldb {db}", flush=True)


def steps_method(args, workdir, seeds, over, keep, env, record, check_pages, check, expected, methods, res) -> None:
    root = os.path.join(workdir, "crawl")
    common = ["--crawl-root", root, "--mlflow-uri", "off", *conf_args(over)]
    segment = None
    logs: dict[str, str] = {}
    for step in STEPS:
        extra = {"inject": [seeds], "generate": []}.get(step, [segment])
        log = os.path.join(workdir, f"step-{step}.stderr")
        run = run_measured([sys.executable, "-m", "jobs.cli", step, *common, *extra], keep, args.timeout_s, env,
                           stderr_path=log)
        if step in ("inject", "generate"):
            with open(log, encoding="utf-8") as fh:
                logs[step] = fh.read()
        if step == "generate" and run["returncode"] == 0:
            segment = run["stdout_tail"].strip().split()[-1]
        record(step, run, counted=False)
        if run["returncode"] != 0:
            raise RuntimeError(f"{step} failed: {run['stderr_tail'][-1500:]}")
        if step == "fetch":
            check_pages("fetch", run, robots=True)
    got = check_inject_generate("steps", logs["inject"] + logs["generate"], check, sum(expected.values()), args.hosts)
    check(got == segment, f"steps: generate's end line names the segment it printed ({got}, {segment})")
    # every step's CPU per page fetched by the fetch step
    fetched = methods["fetch"]["pages"]
    for step in STEPS:
        methods[step]["cpu_ms_per_page"] = methods[step]["cpu_s"] / fetched * 1e3 if fetched else None
    res["segment"] = segment
    res["segment_counts"] = segment_counts(root, segment)
    sc = res["segment_counts"]
    if sc:
        check(sc.get("fetch_status") == {"ok": expected["200"], "redirect": expected["301"],
                                         "not_found": expected["404"]},
              f"fetch: segment statuses {sc.get('fetch_status')}")
    cycle = sum(methods[s]["cpu_s"] for s in STEPS)
    methods["cycle"] = {"cpu_s": cycle, "cpu_ms_per_page": cycle / fetched * 1e3 if fetched else None,
                        "wall_s": sum(methods[s]["wall_s"] for s in STEPS)}


STEP_LINES = {  # the end lines jobs.engine.logs.log_step writes to stderr (each step's summary())
    "inject": re.compile(r"inject: (?:cycle 0: )?(\d+) valid seeds, (\d+) new"),
    "generate": re.compile(r"generate: (?:cycle \d+: )?segment (\S+): (\d+) URLs from (\d+) hosts"),
    "cycle": re.compile(r"cycle 1/1 done in ([\d.]+) s \((.*)\)"),
}


def check_inject_generate(name: str, stderr: str, check: Checker, n: int, hosts: int) -> str | None:
    """Check from a crawl's stderr that inject took every page URL as new and generate put every one
    of them in one segment; return that segment's id."""
    inj = STEP_LINES["inject"].search(stderr)
    check(bool(inj) and int(inj[1]) == int(inj[2]) == n,
          f"{name}: inject took all {n:,} URLs as new ({inj[0] if inj else 'no inject line'})")
    gen = STEP_LINES["generate"].search(stderr)
    check(bool(gen) and int(gen[2]) == n and int(gen[3]) == hosts,
          f"{name}: generate put all {n:,} URLs of {hosts} hosts in one segment "
          f"({gen[0] if gen else 'no generate line'})")
    return gen[1] if gen else None


def crawl_method(args, workdir, seeds, over, keep, env, record, check_pages, check, expected, n, methods,
                 res) -> None:
    """``deltacrawl crawl --seeds --cycles 1``: inject and generate → fetch → dedup → update in one
    process, one JVM and SparkSession (then stats, as every crawl ends), with the steps method's
    options and tracking (off). Divided by the page URLs the web answered during it."""
    root = os.path.join(workdir, "crawl-one-process")
    log = os.path.join(workdir, "crawl-one-process.stderr")
    run = run_measured([sys.executable, "-m", "jobs.cli", "crawl", "--seeds", seeds, "--cycles", "1",
                        "--crawl-root", root, "--mlflow-uri", "off", *conf_args(over)], keep, args.timeout_s, env,
                       stderr_path=log)
    record("crawl", run)
    check_pages("crawl", run, robots=True)
    stderr = ""
    if os.path.exists(log):
        with open(log, encoding="utf-8") as fh:
            stderr = fh.read()
    segment = check_inject_generate("crawl", stderr, check, n, args.hosts)
    done = STEP_LINES["cycle"].search(stderr)
    if done:  # wall seconds per step inside the one process (informational: the machine is shared)
        run["cycle_wall_s"] = {k: float(v.split()[0]) for k, v in
                               (part.strip().split(" ", 1) for part in done[2].split(","))}
    segments = sorted(os.listdir(os.path.join(root, "segments"))) if os.path.isdir(os.path.join(root, "segments")) else []
    check(segments == ([segment] if segment else []), f"crawl: one segment, the one generated ({segments})")
    res["crawl_segment"] = segment
    res["crawl_segment_counts"] = sc = segment_counts(root, segment)
    check(sc.get("fetch_status") == {"ok": expected["200"], "redirect": expected["301"],
                                     "not_found": expected["404"]},
          f"crawl: segment statuses {sc.get('fetch_status')}")
    if res.get("segment_counts"):
        check(sc.get("outlinks") == res["segment_counts"].get("outlinks"),
              f"crawl: segment outlinks {sc.get('outlinks')} = the steps' {res['segment_counts'].get('outlinks')}")
    if "cycle" in methods and run.get("cpu_ms_per_page") is not None and methods["cycle"]["cpu_ms_per_page"]:
        res["crawl_vs_steps"] = {"cpu_s_saved": methods["cycle"]["cpu_s"] - run["cpu_s"],
                                 "ms_per_page_saved": methods["cycle"]["cpu_ms_per_page"] - run["cpu_ms_per_page"]}


def profile_method(args, workdir, urls, cfg, keep, env, record, check, web, methods, res) -> None:
    res["profile"] = {}
    profile_hosts = min(args.hosts, args.profile_hosts)
    profile_urls = urls[:profile_hosts * args.pages]
    profile_expected = expected_statuses_of(web.web, profile_hosts)
    # first unprofiled (the figure to compare changes by: cProfile slows Python code several times
    # more than C calls), then profiled with the parse in its child and in the fetch process
    for label, isolate, profiled in (("task_body", cfg["parse.isolate"], False), ("isolated_parse", True, True),
                                     ("in_process_parse", False, True)):
        if label not in args.profile_runs.split(","):
            continue
        pcfg = dict(cfg, **{"parse.isolate": isolate})
        job = os.path.join(workdir, f"profile-{label}.json")
        with open(job, "w", encoding="utf-8") as fh:
            json.dump({"urls": profile_urls, "cfg": pcfg, "top": args.profile_top, "profile": profiled,
                       "warc_dir": os.path.join(workdir, f"warc-profile-{label}") if cfg["warc.enabled"]
                       else None}, fh, default=str)
        out = os.path.join(workdir, f"profile-{label}-out.json")
        run = run_measured([sys.executable, os.path.abspath(__file__), "--profile-child", job, out], keep,
                           args.timeout_s, env)
        if os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                run["result"] = json.load(fh)
        record(f"profile_{label}", run)
        check(run["web"]["page_status"] == profile_expected and run["web"]["robots"] == profile_hosts,
              f"profile {label}: web answered {run['web']['page_status']} page requests and "
              f"{run['web']['robots']} robots.txt, expected {profile_expected} and {profile_hosts}")
        res["profile"][label] = methods.pop(f"profile_{label}")


def expected_statuses_of(web, hosts: int) -> dict[str, int]:
    """The 200/301/404 counts of the first ``hosts`` hosts' page URLs."""
    return dict(Counter(str(web.page_status(h, k)) for h in range(hosts) for k in range(web.pages)))


def segment_counts(root: str, segment: str | None) -> dict[str, Any]:
    """fetch_status counts and outlinks of the segment's fetched rows (pyarrow, no Spark)."""
    if not segment:
        return {}
    import glob

    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    files = [f for f in glob.glob(os.path.join(root, "segments", segment, "fetched", "**", "*.parquet"),
                                  recursive=True)]
    if not files:
        return {}
    table = pq.read_table(files, columns=["kind", "fetch_status", "outlinks"])
    table = table.filter(pc.equal(table["kind"], "url"))
    statuses = Counter(table["fetch_status"].to_pylist())
    outlinks = pc.sum(pc.list_value_length(table["outlinks"])).as_py() or 0
    return {"fetch_status": dict(statuses), "outlinks": outlinks}


# =========================================================================== report

LABELS = {"floor": "bare aiohttp + gzip + selectolax links (the floor)", "scrapy": "Scrapy + LinkExtractor",
          "fetch": "deltacrawl fetch step", "inject": "deltacrawl inject", "generate": "deltacrawl generate",
          "dedup": "deltacrawl dedup", "update": "deltacrawl update", "cycle": "deltacrawl whole cycle",
          "crawl": "deltacrawl crawl, one process (inject + 1 cycle)",
          "task": "deltacrawl fetch task body (no Spark)",
          **{f"nutch_{s}": f"Nutch 1.22 {s}" for s in NUTCH_STEPS}, "nutch_cycle": "Nutch 1.22 whole cycle"}


def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print()
    params = r.get("params", {})
    print(f"== cost per page on the realistic web: {params.get('hosts')} hosts x {params.get('pages')} pages, "
          f"seed {params.get('seed')} ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB · python {m['python']} · pyspark "
          f"{m['pyspark']} · commit {m['git_commit']} · load {m['loadavg_at_start']} -> {m.get('loadavg_at_end')}")
    if "web" in r:
        w = r["web"]
        print(f"web: {w.get('pages_200', 0):,} pages of 200, median {w.get('median_raw_bytes', 0) / 1e3:.1f} KB "
              f"({w.get('min_raw_bytes', 0) / 1e3:.1f}..{w.get('max_raw_bytes', 0) / 1e3:.1f} KB), "
              f"{w.get('raw_bytes', 0) / max(1, w.get('gzip_bytes', 1)):.2f}x gzip; expected {r.get('expected_statuses')}")
    if not r.get("methods") and not r.get("profile"):
        return
    print(f"\n{'':52s} {'CPU s':>8s} {'wall s':>8s} {'ms/page':>8s} {'x floor':>8s}  CPU by process kind (sampled, s)")
    for k, label in LABELS.items():
        x = r["methods"].get(k)
        if x is None:
            continue
        print(f"  {label:50s} {x['cpu_s']:8.1f} {x['wall_s']:8.1f} {fmt(x['cpu_ms_per_page'], 2):>8s} "
              f"{fmt(r['ratio_to_floor'].get(k), 1):>8s}  {x.get('sampled_by_kind_s', '')}")
    if "fetch" in r["methods"]:
        print(f"  (ms per page = CPU of the tree / page URLs the web answered in that method; the steps divide "
              f"by the fetch step's {r['methods']['fetch']['pages']:,}); segment: {r.get('segment_counts')}")
    if "crawl" in r["methods"]:
        c = r["methods"]["crawl"]
        print(f"  (crawl: inject, generate, fetch, dedup, update and the closing stats in one `deltacrawl crawl "
              f"--cycles 1` process, divided by its {c['pages']:,} pages; wall s by step {c.get('cycle_wall_s')}; "
              f"segment: {r.get('crawl_segment_counts')})")
        if r.get("crawl_vs_steps"):
            v = r["crawl_vs_steps"]
            print(f"  one process against the per-step whole cycle: {v['cpu_s_saved']:.1f} s CPU = "
                  f"{v['ms_per_page_saved']:.2f} ms/page less")
    if "nutch_fetch" in r["methods"]:
        print(f"  (Nutch: each step a `bin/nutch` process, divided by the fetch step's "
              f"{r['methods']['nutch_fetch']['pages']:,} pages; {r.get('nutch')})")
    for label, p in (r.get("profile") or {}).items():
        res = p.get("result") or {}
        if label == "task_body":
            print(f"\n-- fetch_task (a Spark fetch task's body, no Spark, not profiled) on {res.get('urls')} URLs: tree "
                  f"{p['cpu_s']:.1f} s CPU = {fmt(p.get('cpu_ms_per_page'), 2)} ms/page (by kind {p['sampled_by_kind_s']}); "
                  f"WARC {res.get('warc_bytes', 0) / 1e6:.1f} MB")
            continue
        print(f"\n-- profile of fetch_task, {label}: tree {p['cpu_s']:.1f} s CPU ({fmt(p.get('cpu_ms_per_page'), 2)} "
              f"ms/page; by kind {p['sampled_by_kind_s']}), fetch process {fmt(res.get('process_cpu_s'))} s; "
              f"top by own time (profiled total {res.get('profiled_total_s')} s):")
        for f in res.get("top_own", []):
            print(f"   {f['own_s']:8.2f} own {f['cumulative_s']:8.2f} cum {f['calls']:>9} calls  {f['function']}")
    print(f"\nchecks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


# =========================================================================== HTTPS against HTTP

def bench_https(args, workdir: str, check: Checker) -> dict[str, Any]:
    """``--https``: the same realistic web served twice, over HTTP and over HTTPS (a certificate per
    host for its IP literal from a local CA, trusted with fetch.tls_ca_file), each from its own
    process; ``--rounds`` rounds of the floor and the crawl method on each, alternating which scheme
    goes first (ABBA), so drift in the machine's load falls on both. Reports CPU per page of each
    scheme (pooled over the rounds), HTTPS / HTTP, and the connections the web accepted per page
    (over HTTPS: TLS handshakes)."""
    from _realistic_web import RealisticWebProcess

    from crawl.config import build_config
    res: dict[str, Any] = {"params": {"hosts": args.hosts, "pages": args.pages, "seed": args.seed,
                                      "rounds": args.rounds, "https": True}}
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ca = os.path.join(workdir, "local-ca.pem")
    webs: dict[str, Any] = {}
    want = [m for m in ("floor", "task", "crawl") if m in args.methods.split(",")]
    if not want:
        raise RuntimeError("--https runs the floor, task and/or crawl methods (--methods floor,task,crawl)")
    try:
        for scheme in ("http", "https"):
            print(f"cost: generating and compressing {args.hosts * args.pages:,} pages for the {scheme} web",
                  flush=True)
            t = time.perf_counter()
            webs[scheme] = web = RealisticWebProcess(args.hosts, args.pages, args.seed,
                                                     os.path.join(workdir, f"web-{scheme}.stderr"),
                                                     tls_ca=ca if scheme == "https" else None)
            res.setdefault("web", dict(web.sizes, networks=web.networks()))[f"{scheme}_start_s"] = \
                time.perf_counter() - t
        keep = {w.pid for w in webs.values()}
        runs: list[dict[str, Any]] = []
        for rnd in range(1, args.rounds + 1):
            for scheme in (("http", "https") if rnd % 2 else ("https", "http")):
                web = webs[scheme]
                sub = os.path.join(workdir, f"{scheme}-{rnd}")
                os.makedirs(sub)
                urls, expected, n, seeds, over = crawl_inputs(args, web, sub, res,
                                                              {"fetch.tls_ca_file": ca} if scheme == "https" else {})
                cfg = build_config(overrides=over)
                res["config"] = {k: cfg[k] for k in ("fetch.max_concurrency", "fetch.tasks", "fetch.keepalive_s",
                                                     "warc.enabled", "parse.isolate", "spark.master")}
                methods: dict[str, dict[str, Any]] = {}
                web.counters(reset=True)
                record, check_pages = recorder(web, methods, check, expected, args.hosts,
                                               tag=f"{scheme:5s} round {rnd} ")
                if "floor" in want:
                    floor_method(args, sub, urls, cfg, int(cfg["fetch.max_concurrency"]), keep, env, record,
                                 check_pages, check, expected)
                if "task" in want:  # the fetch step's task body without Spark: no JVM's fixed cost
                    task_method(args, sub, urls, cfg, keep, env, record, check_pages)
                if "crawl" in want:
                    crawl_method(args, sub, seeds, over, keep, env, record, check_pages, check, expected, n,
                                 methods, {})
                for name, run in methods.items():
                    seen = run["web"]
                    runs.append({"round": rnd, "scheme": scheme, "method": name, "cpu_s": run["cpu_s"],
                                 "wall_s": run["wall_s"], "pages": run["pages"],
                                 "cpu_ms_per_page": run.get("cpu_ms_per_page"),
                                 "connections": seen.get("connections"), "robots": seen.get("robots"),
                                 "sampled_by_kind_s": run.get("sampled_by_kind_s"),
                                 "cycle_wall_s": run.get("cycle_wall_s")})
        res["runs"] = runs
        res["summary"] = https_summary(runs, want)
    finally:
        for web in webs.values():
            web.stop()
    return res


def task_method(args, workdir, urls, cfg, keep, env, record, check_pages) -> None:
    """jobs.fetch.fetch_task (a Spark fetch task's body: robots, fetch, WARC, isolated parse, links,
    fingerprints as configured) in a process of its own without Spark, not profiled."""
    job = os.path.join(workdir, "task.json")
    with open(job, "w", encoding="utf-8") as fh:
        json.dump({"urls": urls, "cfg": dict(cfg), "top": 0, "profile": False,
                   "warc_dir": os.path.join(workdir, "warc-task") if cfg["warc.enabled"] else None}, fh, default=str)
    out = os.path.join(workdir, "task-out.json")
    run = run_measured([sys.executable, os.path.abspath(__file__), "--profile-child", job, out], keep,
                       args.timeout_s, env)
    record("task", run)
    check_pages("task", run, robots=True)


def https_summary(runs: list[dict[str, Any]], methods: list[str]) -> dict[str, Any]:
    """Per method: each scheme's CPU per page pooled over the rounds (CPU sum / pages sum), the
    per-round figures, HTTPS / HTTP (pooled, and each round's pair), connections per page."""
    out: dict[str, Any] = {}
    for m in methods:
        by: dict[str, Any] = {}
        for scheme in ("http", "https"):
            mine = [r for r in runs if r["method"] == m and r["scheme"] == scheme]
            pages = sum(r["pages"] for r in mine)
            by[scheme] = {"cpu_ms_per_page": sum(r["cpu_s"] for r in mine) / pages * 1e3 if pages else None,
                          "per_round": [r["cpu_ms_per_page"] for r in mine],
                          "connections_per_page": sum(r["connections"] or 0 for r in mine) / pages if pages else None,
                          "connections": [r["connections"] for r in mine]}
        h, s = by["http"]["cpu_ms_per_page"], by["https"]["cpu_ms_per_page"]
        by["ratio"] = s / h if h and s else None
        by["ratio_per_round"] = [b / a if a and b else None
                                 for a, b in zip(by["http"]["per_round"], by["https"]["per_round"])]
        out[m] = by
    return out


def print_https_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    params = r.get("params", {})
    print(f"\n== HTTPS against HTTP on the realistic web: {params.get('hosts')} hosts x {params.get('pages')} pages, "
          f"seed {params.get('seed')}, {params.get('rounds')} rounds (ABBA) ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB · python {m['python']} · commit "
          f"{m['git_commit']} · load {m['loadavg_at_start']} -> {m.get('loadavg_at_end')} · config {r.get('config')}")
    summary = r.get("summary") or {}
    if summary:
        print(f"\n{'':44s} {'HTTP ms/page':>13s} {'HTTPS ms/page':>14s} {'HTTPS/HTTP':>11s}  per round (HTTPS/HTTP)"
              f"   connections/page HTTP, HTTPS (= TLS handshakes/page)")
    for k, s in summary.items():
        label = LABELS.get(k, k)
        print(f"  {label:42s} {fmt(s['http']['cpu_ms_per_page'], 3):>13s} {fmt(s['https']['cpu_ms_per_page'], 3):>14s} "
              f"{fmt(s['ratio'], 3):>11s}  {[round(x, 3) if x else x for x in s['ratio_per_round']]}   "
              f"{fmt(s['http']['connections_per_page'], 4)}, {fmt(s['https']['connections_per_page'], 4)} "
              f"({s['https']['connections']} connections)")
    for x in r.get("runs", []):
        print(f"    round {x['round']} {x['scheme']:5s} {x['method']:6s} cpu {x['cpu_s']:7.1f} s wall {x['wall_s']:6.1f} s "
              f"{fmt(x['cpu_ms_per_page'], 3)} ms/page  connections {x['connections']}  {x['sampled_by_kind_s']}")
    print(f"\nchecks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--floor-child"] and len(argv) == 3:
        return floor_child(argv[1], argv[2])
    if argv[:1] == ["--profile-child"] and len(argv) == 3:
        return profile_child(argv[1], argv[2])
    p = argparse.ArgumentParser(description="CPU per page of every crawler and step on a realistic web (issue 33).")
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--pages", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scrapy-python", default=DEFAULT_SCRAPY_PYTHON,
                   help="an interpreter with scrapy==2.19.0 (default %(default)s); missing: Scrapy is skipped")
    p.add_argument("--nutch-home", default=DEFAULT_NUTCH_HOME,
                   help="Apache Nutch 1.22's runtime/local (default %(default)s, built by bench/build_nutch.sh); "
                        "missing: Nutch is skipped")
    p.add_argument("--profile-top", type=int, default=25, help="functions in the fetch profile (0: no profile)")
    p.add_argument("--profile-hosts", type=int, default=100,
                   help="profile the fetch task body on the first N hosts' URLs (per-page costs do not "
                        "depend on the count; default %(default)s)")
    p.add_argument("--profile-runs", default="task_body,isolated_parse,in_process_parse",
                   help="which fetch task body runs the profile method makes (default %(default)s)")
    p.add_argument("--methods", default="floor,scrapy,steps,crawl,profile",
                   help="which to run, comma-separated (default %(default)s); e.g. floor,profile to "
                        "compare a change to the fetch task body without Spark")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra crawler option")
    p.add_argument("--timeout-s", type=float, default=7200.0, help="per method")
    p.add_argument("--out-json", metavar="FILE")
    p.add_argument("--keep", action="store_true", help="keep the work directory (crawl root, WARCs)")
    p.add_argument("--sample-s", type=float, default=SAMPLE_S, help="the /proc sampler's period (default %(default)s)")
    p.add_argument("--https", action="store_true",
                   help="HTTPS against HTTP: the web served over both (local CA, fetch.tls_ca_file), --methods "
                        "among floor,task,crawl (default floor,crawl) on each, --rounds alternating rounds")
    p.add_argument("--rounds", type=int, default=2, help="with --https: rounds of each scheme (default %(default)s)")
    args = p.parse_args(argv)
    if args.https and "--methods" not in " ".join(argv):
        args.methods = "floor,crawl"
    globals()["SAMPLE_S"] = args.sample_s
    if args.hosts < 1 or args.pages < 2 or any("=" not in kv for kv in args.conf):
        p.error("--hosts >= 1, --pages >= 2, --conf KEY=VALUE")
    check = Checker()
    check(become_subreaper(), "this process is a child subreaper (descendants' CPU is reaped here)")
    result: dict[str, Any] = {"machine": machine_facts(extra_dists=("selectolax",)),
                              "command": "python bench/cost.py " + " ".join(argv)}
    if args.https:
        return run_in_workdir("cost", bench_https, args, check, result, print_https_report)
    return run_in_workdir("cost", bench, args, check, result, print_report)


if __name__ == "__main__":
    sys.exit(main())
