#!/usr/bin/env python
"""What the address guard (crawl/net/addresses.py, crawl/fetch/guard.py) costs the fetcher: its CPU
per fetched page and its share of the fetch's CPU (the issue's target: under 0.1 ms per page), and
each guard call in µs, side by side in one run.

Run:      .venv/bin/python bench/address_guard.py [--hosts 50] [--pages 40] [--rounds 2]
                                                  [--micro-number 5000] [--out-json FILE] [--keep]
          (about a minute on the 2-core machine)
Web:      the bundled test web as a `deltacrawl devweb` subprocess (bench/_common.py DevWebProcess:
          --hosts hosts x --pages pages on 127.0.0.2 upward, port 0, Crawl-delay 0), so the
          fetching process's CPU is the fetcher's alone.
Fetch:    crawl.fetch.fetcher.fetch_partition over every /p/k.html URL of every host, in this
          process, no Spark, no WARC, with fetch.delay_s=0, fetch.delay_factor=0,
          sitemaps.enabled=false, parse.isolate=false (links parsed in-process, so the fetch's CPU
          is all here) and fetch.allow_networks = exactly the web's networks (devweb_networks).
          One untimed warm-up fetch (2 hosts) first, then --rounds runs with per-function timers,
          then one run under cProfile:
            timers   AddressPolicy.host_refusal / address_refusal / port_refusal / __init__,
                     GuardedResolver.resolve, the socket factory's make_socket and refusal_of
                     (fetcher and sitemap reader) wrapped with time.thread_time_ns; only the
                     outermost guard call counts (address_refusal inside host_refusal is not
                     counted twice); make_socket counts minus the socket() it creates, which an
                     unguarded connector creates too.
            cProfile the same functions' cumulative time per caller from outside the guard (pstats
                     callers), make_socket minus socket.__init__, with thread CPU time as the
                     profiler's clock; cProfile slows everything, so its share is of the time the
                     profile measured (every function's own time, summed), not of process CPU.
          Total CPU = time.process_time() around fetch_partition.
Micro:    timeit in thread CPU time (best of 15 x --micro-number calls): host_refusal on a name, an IPv4 literal and an
          IPv6 literal with a port; address_refusal on IPv4, IPv6 and IPv4-mapped IPv6 strings;
          a loopback address (refused) and a test-web address (allowed); the socket factory's
          make_socket against socket.socket (create + close). With the default policy (no
          allow list) and with the run's policy (the web's networks, scanned first).
Prints:   per run: pages fetched, CPU s, CPU ms/page, guard ms, guard ms/page, guard share of the
          fetch's CPU, connections opened (make_socket calls); per guard function: calls and ms;
          the micro-timings in µs per call; machine facts.
Checks:   every URL ok (none blocked_address) in every run; a host outside the allow list
          (127.0.0.1 on the web's port) is blocked_address (loopback) without a request; the
          guard was called (host_refusal once per host, make_socket at least once per host).
Exit:     0 done · 1 a check failed (figures still printed/written).

Loopback only: the test web binds 127.0.x.y.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import os
import pstats
import socket
import statistics
import sys
import tempfile
import time
import timeit
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import Checker, DevWebProcess, fetch_rows, finish, fmt, machine_facts, release  # noqa: E402

# timeit repeats, timed in thread CPU time (time.thread_time): the best of many short batches, so a
# loaded machine's preemptions drop out
REPEAT = 15
# the guard functions, by the name the report uses
GUARD = ("AddressPolicy.__init__", "AddressPolicy.host_refusal", "AddressPolicy.address_refusal",
         "AddressPolicy.port_refusal", "GuardedResolver.resolve", "make_socket", "refusal_of")



# --------------------------------------------------------------------------- per-function timers

class GuardTimers:
    """Wraps the guard's functions where the fetcher finds them; thread CPU ns per function
    (inclusive) and, for the outermost guard call only, the guard's total."""

    def __init__(self) -> None:
        self.ns: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self.socket_ns = 0   # socket() created inside make_socket (not the guard's cost)
        self.outer_ns = 0    # outermost guard calls, socket() excluded
        self._depth = 0
        self._undo: list[tuple[Any, str, Any]] = []

    def _enter(self) -> int:
        self._depth += 1
        return time.thread_time_ns()

    def _leave(self, name: str, t0: int) -> None:
        dt = time.thread_time_ns() - t0
        self._depth -= 1
        self.ns[name] += dt
        self.calls[name] += 1
        if self._depth == 0:
            self.outer_ns += dt

    def _wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*a, **kw):
            t0 = self._enter()
            try:
                return fn(*a, **kw)
            finally:
                self._leave(name, t0)
        return timed

    def _wrap_async(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        async def timed(*a, **kw):
            # for a name this includes the inner resolver's own work (IP literals never get here)
            t0 = self._enter()
            try:
                return await fn(*a, **kw)
            finally:
                self._leave(name, t0)
        return timed

    def _patch(self, owner: Any, attr: str, value: Any) -> None:
        self._undo.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    def install(self) -> "GuardTimers":
        import crawl.fetch.fetcher as fetcher
        import crawl.fetch.guard as guard
        import crawl.fetch.sitemap_reader as sitemap_reader
        from crawl.net.addresses import AddressPolicy
        for meth in ("__init__", "host_refusal", "address_refusal", "port_refusal"):
            self._patch(AddressPolicy, meth, self._wrap(f"AddressPolicy.{meth}", getattr(AddressPolicy, meth)))
        self._patch(guard.GuardedResolver, "resolve",
                    self._wrap_async("GuardedResolver.resolve", guard.GuardedResolver.resolve))
        for module in (fetcher, sitemap_reader):
            self._patch(module, "refusal_of", self._wrap("refusal_of", guard.refusal_of))
        real_factory = fetcher.guarded_socket_factory

        def timed_factory(policy):
            return self._wrap("make_socket", real_factory(policy))
        self._patch(fetcher, "guarded_socket_factory", timed_factory)

        # make_socket calls socket.socket through guard's module global `socket`: time it apart
        timers = self

        class _SocketModule:
            def __getattr__(self, name: str) -> Any:
                return getattr(socket, name)

            @staticmethod
            def socket(*a, **kw):
                t0 = time.thread_time_ns()
                try:
                    return socket.socket(*a, **kw)
                finally:
                    timers.socket_ns += time.thread_time_ns() - t0
        self._patch(guard, "socket", _SocketModule())
        return self

    def guard_ns(self) -> int:
        """CPU ns inside the guard: outermost guard calls minus the sockets make_socket created
        (make_socket is always outermost: aiohappyeyeballs calls it)."""
        return self.outer_ns - self.socket_ns

    def uninstall(self) -> None:
        while self._undo:
            owner, attr, value = self._undo.pop()
            setattr(owner, attr, value)


# --------------------------------------------------------------------------- cProfile

def profile_guard(prof: cProfile.Profile) -> dict[str, Any]:
    """The guard's time from a profile: each guard function's cumulative time as called from
    outside the guard (so nested guard calls count once), make_socket minus socket.__init__."""
    st = pstats.Stats(prof)
    names: dict[tuple, str] = {}
    for key in st.stats:
        path, _, func = key
        if path.endswith(os.path.join("crawl", "net", "addresses.py")) and func in (
                "__init__", "host_refusal", "address_refusal", "port_refusal"):
            names[key] = f"AddressPolicy.{func}"
        elif path.endswith(os.path.join("crawl", "fetch", "guard.py")) and func in ("resolve", "make_socket",
                                                                                    "refusal_of"):
            names[key] = "GuardedResolver.resolve" if func == "resolve" else func
        elif path.endswith(os.path.join("crawl", "net", "addresses.py")) and func == "from_config":
            names[key] = "AddressPolicy.from_config"
    per: dict[str, dict[str, float]] = {}
    outer = 0.0
    for key, name in names.items():
        cc, nc, tt, ct, callers = st.stats[key]
        per[name] = {"calls": nc, "cum_s": ct}
        for caller, (_c_nc, _c_cc, _c_tt, c_ct) in callers.items():
            if caller not in names:
                outer += c_ct
    sock = 0.0
    for key, (_cc, _nc, _tt, _ct, callers) in st.stats.items():
        if key[0].endswith("socket.py") and key[2] == "__init__":
            for caller, (_c_nc, _c_cc, _c_tt, c_ct) in callers.items():
                if names.get(caller) == "make_socket":
                    sock += c_ct
    total = sum(v[2] for v in st.stats.values())
    return {"functions": per, "guard_s": outer - sock, "socket_s": sock, "profile_total_s": total}


# --------------------------------------------------------------------------- one fetch

def one_fetch(urls: list[str], cfg: Any, mode: str) -> dict[str, Any]:
    from crawl.fetch.fetcher import fetch_partition
    rows = fetch_rows(urls, "bench-guard")
    timers = GuardTimers().install() if mode == "timers" else None
    # thread CPU time as cProfile's clock: a preemption on this loaded machine is not charged to the
    # function it interrupts (the default wall clock once charged 14 ms to 50 host_refusal calls)
    prof = cProfile.Profile(time.thread_time_ns, 1e-9) if mode == "cprofile" else None
    try:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        out = fetch_partition(rows, cfg)
        if prof is not None:
            prof.disable()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        if timers is not None:
            timers.uninstall()
    url_rows = [r for r in out if r.get("kind") == "url"]
    statuses = collections.Counter(r["fetch_status"] for r in url_rows)
    pages = statuses.get("ok", 0)
    res: dict[str, Any] = {"mode": mode, "urls": len(rows), "hosts": len({r["host"] for r in rows}),
                           "pages": pages, "statuses": dict(statuses), "wall_s": wall, "cpu_s": cpu,
                           "cpu_ms_per_page": 1000 * cpu / pages if pages else None,
                           "errors": [r["error"] for r in url_rows if r["fetch_status"] != "ok"][:3]}
    if timers is not None:
        res["functions"] = {n: {"calls": timers.calls[n], "ms": timers.ns[n] / 1e6} for n in GUARD}
        res["socket_ms"] = timers.socket_ns / 1e6
        res["guard_ms"] = timers.guard_ns() / 1e6
        res["connections"] = timers.calls["make_socket"]
    if prof is not None:
        g = profile_guard(prof)
        res["functions"] = {n: {"calls": v["calls"], "ms": 1000 * v["cum_s"]} for n, v in g["functions"].items()}
        res["socket_ms"] = 1000 * g["socket_s"]
        res["guard_ms"] = 1000 * g["guard_s"]
        res["connections"] = g["functions"].get("make_socket", {}).get("calls")
        res["profile_total_s"] = g["profile_total_s"]
    if "guard_ms" in res:
        res["guard_ms_per_page"] = res["guard_ms"] / pages if pages else None
        # under cProfile the process's CPU is much the profiler's own: the share is of the time the
        # profile measured (every function's own time, summed)
        whole = res["profile_total_s"] if prof is not None else cpu
        res["guard_share"] = res["guard_ms"] / 1000 / whole if whole > 0 else None
    return res


# --------------------------------------------------------------------------- micro-timings

def micro(networks: list[str], port: int, number: int) -> dict[str, Any]:
    from crawl.fetch.guard import guarded_socket_factory
    from crawl.net.addresses import AddressPolicy
    policies = {"default": AddressPolicy(), "run": AddressPolicy(networks)}
    web_addr = networks[0].split("/")[0]
    cases = [
        ("host_refusal", "name", "example.com:8080"),
        ("host_refusal", "IPv4 literal", "93.184.216.34:8080"),
        ("host_refusal", "IPv6 literal", "[2606:4700::1111]:8080"),
        ("host_refusal", "test-web address", f"{web_addr}:{port}"),
        ("address_refusal", "IPv4", "93.184.216.34"),
        ("address_refusal", "IPv6", "2606:4700::1111"),
        ("address_refusal", "IPv4-mapped IPv6", "::ffff:93.184.216.34"),
        ("address_refusal", "loopback 127.0.0.1", "127.0.0.1"),
        ("address_refusal", "test-web address", web_addr),
    ]
    rows = []
    for func, label, arg in cases:
        row: dict[str, Any] = {"call": f"{func}({arg!r})", "what": label}
        for pname, policy in policies.items():
            call = getattr(policy, func)
            call(arg)
            best = min(timeit.repeat(lambda: call(arg), number=number, repeat=REPEAT, timer=time.thread_time))
            refusal = call(arg)
            row[pname] = {"us": 1e6 * best / number, "refused": refusal.reason if refusal else None}
        rows.append(row)
    # the socket factory against a bare socket(): what the guard adds per connection
    info = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80))
    n = max(1, number // 10)
    sock_row: dict[str, Any] = {"call": "make_socket(AF_INET 93.184.216.34) + close", "what": "socket factory"}
    bare = min(timeit.repeat(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 6).close(),
                             number=n, repeat=REPEAT, timer=time.thread_time))
    for pname, policy in policies.items():
        make = guarded_socket_factory(policy)
        t = min(timeit.repeat(lambda: make(info).close(), number=n, repeat=REPEAT, timer=time.thread_time))
        sock_row[pname] = {"us": 1e6 * t / n, "refused": None}
    sock_row["bare_socket_us"] = 1e6 * bare / n
    rows.append(sock_row)
    return {"number": number, "run_networks": len(networks), "rows": rows}


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2, help="runs with per-function timers (then one cProfile run)")
    ap.add_argument("--micro-number", type=int, default=5000, help="calls per timeit repeat")
    ap.add_argument("--out-json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    if args.hosts < 2 or args.pages < 1 or args.rounds < 1:
        ap.error("--hosts >= 2, --pages >= 1, --rounds >= 1")

    from crawl.config import build_config
    from crawl.net.addresses import BLOCKED_STATUS
    facts = machine_facts()
    check = Checker()
    workdir = tempfile.mkdtemp(prefix="deltacrawl-bench-guard-", dir="/tmp")
    result: dict[str, Any] = {"benchmark": "address_guard", "machine": facts, "params": vars(args),
                              "command": "python bench/address_guard.py " + " ".join(argv if argv is not None
                                                                                      else sys.argv[1:])}
    web = DevWebProcess(args.hosts, args.pages, os.path.join(workdir, "devweb.jsonl"), crawl_delay_s=0.0)
    try:
        cfg = build_config(overrides={"fetch.delay_s": 0.0, "fetch.delay_factor": 0.0, "sitemaps.enabled": False,
                                      "parse.isolate": False, "warc.enabled": False,
                                      "fetch.allow_networks": web.networks})
        result["config"] = {k: cfg[k] for k in ("fetch.delay_s", "fetch.delay_factor", "fetch.max_concurrency",
                                                "sitemaps.enabled", "parse.isolate", "fetch.allow_networks")}
        urls = [f"{base}p/{k}.html" for base in web.seeds for k in range(args.pages)]
        print(f"bench: devweb subprocess on port {web.port}, {len(urls)} URLs on {len(web.seeds)} hosts, "
              f"allow_networks {web.networks}", flush=True)

        warm_urls = [f"{base}p/{k}.html" for base in web.seeds[:2] for k in range(min(3, args.pages))]
        warm = one_fetch(warm_urls, cfg, "plain")
        check(warm["statuses"] == {"ok": len(warm_urls)},
              f"warm-up: statuses {warm['statuses']}, expected {len(warm_urls)} ok")
        # a host outside the allow list: refused before any request
        before = web.log_size()
        outside = one_fetch([f"http://127.0.0.1:{web.port}/p/0.html"], cfg, "timers")
        time.sleep(0.2)
        check(outside["statuses"] == {BLOCKED_STATUS: 1} and "loopback" in (outside["errors"] or [""])[0]
              and not web.read_log(before),
              f"127.0.0.1 (not allowed): {outside['statuses']} {outside['errors']}, web saw "
              f"{len(web.read_log(before))} requests; expected blocked_address (loopback), none")

        runs = []
        for i in range(args.rounds + 1):
            mode = "timers" if i < args.rounds else "cprofile"
            run = one_fetch(urls, cfg, mode)
            runs.append(run)
            print(f"bench: run {i + 1} ({mode}): {run['pages']} pages, CPU {run['cpu_s']:.2f} s, guard "
                  f"{run['guard_ms']:.3f} ms ({100 * run['guard_share']:.4f} %), {run['connections']} connections",
                  flush=True)
            check(run["statuses"] == {"ok": len(urls)},
                  f"run {i + 1} ({mode}): statuses {run['statuses']}, expected {len(urls)} ok ({run['errors']})")
            calls = run["functions"]
            check(calls["AddressPolicy.host_refusal"]["calls"] >= args.hosts
                  and (calls.get("make_socket") or {}).get("calls", 0) >= args.hosts,
                  f"run {i + 1} ({mode}): the guard judged every host and connection "
                  f"(host_refusal {calls['AddressPolicy.host_refusal']['calls']}, "
                  f"make_socket {(calls.get('make_socket') or {}).get('calls', 0)})")
        result["runs"] = runs
        timer_runs = [r for r in runs if r["mode"] == "timers"]
        result["timers_median"] = {k: statistics.median(r[k] for r in timer_runs)
                                   for k in ("guard_ms_per_page", "guard_share", "cpu_ms_per_page")}
        result["micro"] = micro(web.networks, web.port, args.micro_number)
    finally:
        web.stop()
        release(None, workdir, args.keep)

    def report(r: dict[str, Any]) -> None:
        p = r["params"]
        print(f"\n== address guard cost: {p['hosts']} hosts x {p['pages']} pages, fetch_partition in one "
              f"process (parse in-process, no WARC, no sitemaps, delay 0) ==")
        print(f"{'run':<14}{'pages':>7}{'CPU s':>8}{'CPU ms/page':>13}{'guard ms':>10}{'guard ms/page':>15}"
              f"{'share of CPU':>14}{'connections':>13}")
        for i, run in enumerate(r.get("runs", [])):
            print(f"{str(i + 1) + ' ' + run['mode']:<14}{run['pages']:>7,}{run['cpu_s']:>8.2f}"
                  f"{run['cpu_ms_per_page']:>13.3f}{run['guard_ms']:>10.3f}{run['guard_ms_per_page']:>15.6f}"
                  f"{100 * run['guard_share']:>13.4f}%{fmt(run['connections']):>13}")
        if r.get("runs"):
            print("per guard function (calls, ms inclusive; nested calls are inside their caller):")
            for name in GUARD:
                cells = []
                for run in r["runs"]:
                    f = run["functions"].get(name) or {"calls": 0, "ms": 0.0}
                    cells.append(f"{f['calls']:>6} {f['ms']:>8.3f}")
                print(f"  {name:<30}" + "  |".join(cells))
            print(f"  {'(socket() in make_socket)':<30}" + "  |".join(f"{'':>6} {run['socket_ms']:>8.3f}"
                                                                     for run in r["runs"]))
            m = r["timers_median"]
            print(f"median of the timer runs: guard {m['guard_ms_per_page']:.6f} ms/page (target < 0.1), "
                  f"{100 * m['guard_share']:.4f} % of the fetch's CPU ({m['cpu_ms_per_page']:.3f} ms/page)")
        if r.get("micro"):
            mi = r["micro"]
            print(f"\nguard calls, µs per call (best of {REPEAT} x {mi['number']:,}); default policy = no allow "
                  f"list, run policy = the web's {mi['run_networks']} networks")
            print(f"{'call':<52}{'default µs':>11}{'run µs':>9}  refused (default / run)")
            for row in mi["rows"]:
                d, rr = row["default"], row["run"]
                print(f"{row['call']:<52}{d['us']:>11.2f}{rr['us']:>9.2f}  {d['refused'] or '-'} / "
                      f"{rr['refused'] or '-'}")
                if "bare_socket_us" in row:
                    print(f"{'socket.socket(AF_INET) + close, no guard':<52}{row['bare_socket_us']:>11.2f}")
                    print(f"{'  the guard part of make_socket (difference)':<52}"
                          f"{d['us'] - row['bare_socket_us']:>11.2f}{rr['us'] - row['bare_socket_us']:>9.2f}")
        print(f"machine: {r['machine']}")

    return finish(result, check.failures, args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
