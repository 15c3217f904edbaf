"""Helpers shared by the benchmark scripts in bench/ (bench/README.md lists them).

* ``machine_facts()``: date, cores, memory, versions, commit, load average — printed with every
  figure, because this is a shared, noisy 2-core machine and only same-run ratios compare.
* ``raw_fetch()``: the plain-aiohttp baseline (one coroutine per host, so one request in flight
  per host; a global concurrency cap; optionally selectolax link extraction with
  crawl.parse.links.extract_outlinks). Top-level, so a spawned child process can run it.
* ``DevWebProcess``: the bundled test web as a ``deltacrawl devweb`` subprocess, so
  its server does not share a GIL with what is being measured.
* ``devweb_networks()``: the CIDRs of exactly a test web's addresses, for ``fetch.allow_networks``
  (the address guard refuses loopback, so a benchmark crawling the test web allows that web and
  nothing else).
* ``Checker``, ``finish()``, ``release()``, ``run_in_workdir()``: a benchmark's checks (exit 1 when one
  fails), its JSON output and its work folder; ``cpu_snapshot()`` / ``cpu_used()``: CPU from /proc.
* small formatting helpers (``rate``, ``fmt``, ``http_span``, ``median_run``).

Everything stays on loopback: the test web binds 127.0.x.y addresses only.
"""
from __future__ import annotations

import asyncio
import collections
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # the package is installed editable; this only helps a bare checkout
    sys.path.insert(0, REPO)


# --------------------------------------------------------------------------- raw aiohttp baseline

async def _raw_fetch_async(urls: list[str], concurrency: int, user_agent: str,
                           timeouts: tuple[float, float, float],
                           max_outlinks: int | None = None, ca_file: str | None = None) -> dict[str, Any]:
    import aiohttp
    extract = None
    if max_outlinks is not None:
        from crawl.parse.links import extract_outlinks as extract
    by_host: "collections.OrderedDict[str, list[str]]" = collections.OrderedDict()
    for url in urls:
        by_host.setdefault(url.split("/", 3)[2], []).append(url)
    statuses: collections.Counter = collections.Counter()
    body_bytes = 0
    outlinks = 0
    slots = asyncio.Semaphore(concurrency)
    total, connect, sock_read = timeouts
    timeout = aiohttp.ClientTimeout(total=total, connect=connect, sock_read=sock_read)
    ssl_ctx = True
    if ca_file:  # https URLs of a local CA (bench/cost.py --https): trust it too, verify as usual
        import ssl
        ssl_ctx = ssl.create_default_context()
        ssl_ctx.load_verify_locations(cafile=ca_file)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=1, ssl=ssl_ctx)

    async def one_host(host_urls: list[str]) -> None:
        nonlocal body_bytes, outlinks
        for url in host_urls:  # one coroutine per host: one request in flight per host
            async with slots:
                try:
                    async with session.get(url, allow_redirects=False) as resp:
                        body = await resp.read()
                        body_bytes += len(body)
                        statuses[str(resp.status)] += 1
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                    statuses[type(exc).__name__] += 1
                    continue
            if extract is not None and resp.status == 200:
                outlinks += len(extract(body, url, max_outlinks))

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     headers={"User-Agent": user_agent},
                                     cookie_jar=aiohttp.DummyCookieJar()) as session:
        await asyncio.gather(*(one_host(u) for u in by_host.values()))
    seconds = time.perf_counter() - started
    out = {"urls": len(urls), "hosts": len(by_host), "seconds": seconds,
           "pages_per_s": len(urls) / seconds if seconds > 0 else None,
           "statuses": dict(sorted(statuses.items())), "body_bytes": body_bytes}
    if extract is not None:
        out["outlinks"] = outlinks
    return out


def raw_fetch(urls: list[str], concurrency: int, user_agent: str,
              timeouts: tuple[float, float, float], max_outlinks: int | None = None,
              ca_file: str | None = None) -> dict[str, Any]:
    """Fetch ``urls`` with plain aiohttp (and extract links when ``max_outlinks`` is given; https
    URLs trust ``ca_file``'s CAs as well); top-level so a spawned child process can run it."""
    return asyncio.run(_raw_fetch_async(urls, concurrency, user_agent, timeouts, max_outlinks, ca_file))


# --------------------------------------------------------------------------- the test web's networks

def fetch_rows(urls: list[str], segment_id: str = "bench") -> list[dict[str, Any]]:
    """Fetchlist rows as a Spark fetch task gets them (crawl.fetch.fetcher.FETCHLIST_FIELDS)."""
    from crawl.net.urls import host_bucket, host_of, normalize_url, url_hash
    rows = []
    for u in urls:
        u = normalize_url(u)
        host = host_of(u)
        rows.append({"url": u, "url_hash": url_hash(u), "host": host, "host_bucket": host_bucket(host, 16),
                     "depth": 0, "score": 1.0, "segment_id": segment_id, "etag": None, "last_modified": None,
                     "robots_status": None, "robots_txt": None, "robots_fetched_at": None, "backoff_s": None})
    return rows


def devweb_networks(hosts: int, hostile: bool = False) -> list[str]:
    """CIDR strings covering exactly the addresses of a ``DevWeb(hosts=hosts, hostile=hostile)``
    (``DevWeb.networks()``, computed from the host count, so it also serves a ``deltacrawl devweb``
    subprocess): what a benchmark that crawls that web puts in ``fetch.allow_networks``, since the
    address guard (crawl/net/addresses.py) refuses loopback. For a CLI child pass
    ``--conf fetch.allow_networks=`` + ``json.dumps(devweb_networks(...))``."""
    from crawl.devweb.web import HOSTILE, host_address
    from crawl.net.addresses import networks_of
    return networks_of(host_address(i) for i in range(hosts + (len(HOSTILE) if hostile else 0)))


# --------------------------------------------------------------------------- the test web in a subprocess

def stop_server_process(proc: subprocess.Popen, *files) -> None:
    """Stop a web served from a subprocess: SIGTERM (serve_forever stops cleanly), SIGKILL after
    30 s; then close its stdout and the other ``files`` (its stderr log)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()
    for f in files:
        f.close()


class DevWebProcess:
    """``deltacrawl devweb`` in a child process (its own interpreter, its own GIL).

    ``seeds`` are the host root URLs it printed, ``port`` their common port, ``log_path`` the
    JSON-lines request log (one line per completed request, see crawl/devweb/web.py), ``networks``
    the CIDRs of exactly its addresses (``devweb_networks``: what fetch.allow_networks must allow).
    """

    def __init__(self, hosts: int, pages_per_host: int, log_path: str, crawl_delay_s: float = 0.0,
                 start_timeout_s: float = 120.0):
        self.log_path = log_path
        self.networks = devweb_networks(hosts)
        exe = os.path.join(os.path.dirname(sys.executable), "deltacrawl")
        cmd = [exe if os.path.exists(exe) else "deltacrawl", "devweb", "--log", log_path,
               "--conf", f"devweb.hosts={hosts}", "--conf", f"devweb.pages_per_host={pages_per_host}",
               "--conf", "devweb.port=0", "--conf", f"devweb.crawl_delay_s={crawl_delay_s}",
               # plain HTTP on IP literals: the benchmarks compare with figures taken so (bench/cost.py
               # --https measures what TLS and names cost)
               "--conf", "devweb.named=false"]
        self.command = " ".join(cmd)
        self._stderr = open(log_path + ".stderr", "w", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, bufsize=1)
        self.seeds: list[str] = []
        deadline = time.monotonic() + start_timeout_s
        try:
            while len(self.seeds) < hosts:  # it prints one seed URL per host, then a banner
                if time.monotonic() > deadline:
                    raise RuntimeError("devweb subprocess did not print its seeds in time")
                line = self.proc.stdout.readline()
                if not line:
                    with open(log_path + ".stderr", encoding="utf-8") as fh:
                        raise RuntimeError(f"devweb subprocess ended early: {fh.read()[-2000:]}")
                line = line.strip()
                if line.startswith("http://"):
                    self.seeds.append(line)
        except BaseException:
            self.stop()
            raise
        self.port = int(self.seeds[0].rsplit(":", 1)[1].strip("/"))

    def log_size(self) -> int:
        return os.path.getsize(self.log_path)

    def read_log(self, start: int = 0) -> list[dict[str, Any]]:
        """Request-log entries written from byte ``start`` on (complete lines only)."""
        with open(self.log_path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
        return [json.loads(line) for line in data.splitlines() if line.endswith(b"}")]

    def stop(self) -> None:
        stop_server_process(self.proc, self._stderr)


# --------------------------------------------------------------------------- helpers

class Checker:
    """A benchmark's checks: ``check(ok, what)`` prints the outcome; ``check.failures`` lists the
    failed ones (the exit code says whether any did)."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, ok: bool, what: str) -> None:
        print(f"check: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            self.failures.append(what)


def machine_facts(extra_dists: tuple[str, ...] = ()) -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    def run(cmd: list[str]) -> str | None:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO)
            return (out.stdout or out.stderr).strip() or None
        except (OSError, subprocess.SubprocessError):
            return None

    mem_kb = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
                    break
    except OSError:
        pass
    java = run(["java", "-version"])
    commit = run(["git", "rev-parse", "--short", "HEAD"])
    dirty = run(["git", "status", "--porcelain", "--untracked-files=no"])
    facts = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": run(["nproc"]) or os.cpu_count(),
        "mem_total_gib": round(mem_kb / 1024 / 1024, 1) if mem_kb else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": version("pyspark"),
        "delta_spark": version("delta-spark"),
        "aiohttp": version("aiohttp"),
        "java": java.splitlines()[0] if java else None,
        "git_commit": (commit + ("-dirty" if dirty else "")) if commit else None,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    if dirty:
        facts["dirty_files"] = [line.split(None, 1)[-1] for line in dirty.splitlines()]
    for dist in extra_dists:
        facts[dist.replace("-", "_")] = version(dist)
    return facts


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_snapshot(pids: tuple[int, ...] = ()) -> dict[str, Any]:
    """CPU seconds since boot, from /proc: the whole machine's busy and total time (/proc/stat,
    every core; busy = all but idle and iowait) and each of ``pids``' own user + system time
    (/proc/<pid>/stat; None once it is gone). Subtract two snapshots with ``cpu_used``."""
    snap: dict[str, Any] = {"busy_s": None, "total_s": None, "pids": {}}
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        snap["total_s"], snap["busy_s"] = sum(fields[:8]) / _TICK, (sum(fields[:8]) - idle) / _TICK
    except (OSError, ValueError, IndexError):
        pass
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()  # fields after "(comm)"; utime, stime = 14, 15
            snap["pids"][pid] = (int(rest[11]) + int(rest[12])) / _TICK
        except (OSError, ValueError, IndexError):
            snap["pids"][pid] = None
    return snap


def cpu_used(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """CPU seconds between two cpu_snapshot()s: busy_s (every process on the machine), capacity_s
    (cores x wall time) and per pid."""
    out: dict[str, Any] = {"busy_s": None, "capacity_s": None, "pids": {}}
    if before["busy_s"] is not None and after["busy_s"] is not None:
        out["busy_s"] = after["busy_s"] - before["busy_s"]
        out["capacity_s"] = after["total_s"] - before["total_s"]
    for pid, t in after["pids"].items():
        t0 = before["pids"].get(pid)
        out["pids"][pid] = t - t0 if t is not None and t0 is not None else None
    return out


def rate(n: float | None, seconds: float) -> float | None:
    return n / seconds if n is not None and seconds > 0 else None


def fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def http_span(entries: list[dict[str, Any]]) -> float | None:
    """Seconds between the first and the last request the test web logged in ``entries``."""
    if len(entries) < 2:
        return None
    ts = [e["ts"] for e in entries]
    return max(ts) - min(ts)


def median_run(runs: list[dict[str, Any]], key: str = "pages_per_s") -> dict[str, Any]:
    """The run with the median ``key`` (upper median for an even count), with every run's value."""
    ordered = sorted(runs, key=lambda r: r[key])
    return dict(ordered[len(ordered) // 2], **{f"runs_{key}": [r[key] for r in runs]})


def release(spark: Any, workdir: str, keep: bool) -> None:
    """The end of a benchmark that ran Spark in a work directory: stop the session (if one was
    started) and delete the directory unless ``keep``."""
    if spark is not None:
        spark.stop()
    if keep:
        print(f"bench: kept {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def run_in_workdir(name: str, bench: Any, args: Any, check: Any, result: dict[str, Any], report) -> int:
    """The body of a benchmark's main that works in a temporary directory: run ``bench(args,
    workdir, check)`` into ``result`` (a RuntimeError is a failed check), release the directory
    (``args.keep``) and ``finish``."""
    workdir = tempfile.mkdtemp(prefix=f"deltacrawl-bench-{name}-", dir="/tmp")
    print(f"{name}: work directory {workdir}", flush=True)
    try:
        result.update(bench(args, workdir, check))
    except RuntimeError as exc:
        check(False, str(exc))
    finally:
        release(None, workdir, args.keep)
    return finish(result, check.failures, args.out_json, report)


def finish(result: dict[str, Any], failures: list[str], out_json: str | None, report) -> int:
    """The end of every benchmark: load average, the printed report, JSON figures, failed
    checks -> exit code."""
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["checks_failed"] = failures
    report(result)
    if out_json:
        with open(out_json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2, default=str)
            fh.write("\n")
        print(f"bench: figures written to {out_json}")
    if failures:
        print(f"bench: {len(failures)} check(s) FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0
