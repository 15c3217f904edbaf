#!/usr/bin/env python
"""Seen-URL Bloom filter benchmark (crawl/net/bloom.py, jobs/engine/seen_filter.py): its
false-positive rate against the configured one, its memory, its speed, and how many outlink
rows it keeps out of the shuffle in a real crawl.

Run:      .venv/bin/python bench/bloom.py [--only fpr|spark|crawl ...] [--out-json FILE] [--keep]
          [--sizes 100000,1000000] [--fprs 0.01,0.001] [--probes 1000000] [--spark-urls 1000000]
          [--builds 3] [--spark-added 100000] [--hosts 60] [--pages 40] [--cycles 3] [--seed 20261130]
Measures: (a) fpr: for each n in --sizes and fpr in --fprs, BloomFilter.for_capacity(n, fpr),
          add_many of n generated URLs (realistic shapes, fixed seed), then --probes URLs that
          were not added: observed false-positive rate next to the configured fpr and
          expected_fpr(n); m, k, bytes, bits per URL; ns per add (add_many, the build path) and
          per lookup (``url in bloom``, the fetch-task path) of absent and of present URLs. Then the
          production sizing: a full build (jobs/engine/seen_filter.py) sizes the filter for
          max(HEADROOM n, MIN_FILTER_CAPACITY) URLs capped at discovery.bloom_max_mb, so a small
          crawldb gets a roomier filter and later cycles can add to it.
          (b) spark: a Delta table with a ``url`` column of --spark-urls rows at <tmp>/crawl/crawldb,
          then jobs.engine.seen_filter.seen_filter on it with no stored filter (--builds full builds;
          seconds, MiB, serialised bytes); then once more with the stored filter (up to date); then
          --spark-added new URLs appended (as a cycle's update inserts them) and the stored filter
          brought up to date from the change data, against a full build of the grown table.
          (c) crawl: --cycles cycles of generate/fetch/dedup/update (as jobs/crawl_cycles.py run) over the
          bundled test web (crawl.devweb.web.DevWeb, --hosts x --pages, seeded with every host's /,
          fetch.delay_s 0, generate.max_urls_per_host = --pages), twice in one SparkSession: the
          filter on (default discovery.bloom_fpr) and off (discovery.bloom_fpr = 0). The two crawls
          run interleaved (cycle k of one, then of the other; the order alternates per cycle) so
          JVM warm-up and load drift hit both alike. Per cycle: outlink rows that left the fetch
          tasks (sum of size(outlinks) over the segment's fetched url rows), links dropped as
          "known" (the fetched host rows' link_rejects), the share kept out, and the seconds of
          fetch (which builds the filter), the filter build alone, dedup and update.
Checks:   (a) no false negatives; the observed rate within 5 sigma (+1 URL) of expected_fpr(n) and
          not above the configured fpr beyond 5 sigma. (b) the filter holds --spark-urls URLs; its
          bits equal a filter of the same shape built in this process from the same URLs; no false
          negative on a 20,000-row sample read back from the table; an unchanged table gets the
          stored filter as it is; after the append the stored filter is "updated" by exactly the
          appended URLs and has the bits of a one-process build of all its URLs. (c) both crawls fetch the same
          URLs each cycle; without the filter each cycle's outlink rows = with the filter's outlink
          rows + its "known" drops; links_kept = outlink rows; hostdb's "known" total = the
          segments' sum; both crawldbs end with the same URL set (any difference is listed: only
          a false positive may delay a URL, and none is expected at these sizes).
Exit:     0 done · 1 a check failed (figures are still printed and written) · 2 bad arguments.

Everything stays on loopback: the test web binds 127.0.x.y addresses only. Data lives in a
temporary directory under /tmp, deleted at the end unless --keep is given.
"""
from __future__ import annotations

import argparse
import collections
import math
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import Checker, devweb_networks, finish, fmt, machine_facts, release  # noqa: E402

PARTS = ("fpr", "spark", "crawl")
SIGMAS = 5.0
FN_SAMPLE = 100_000        # present URLs looked up per filter in (a): timing and the no-false-negative check
SPARK_SAMPLE_ROWS = 20_000  # rows read back from the Delta table in (b) for the no-false-negative check


# --------------------------------------------------------------------------- URLs

_WORDS = (
    "news sport world local business market travel food recipe garden home health science music "
    "film book review guide photo video story blog forum shop store product offer deal price cart "
    "river mountain forest cloud ocean harbor lantern meadow pebble willow copper amber cobalt "
    "saffron thistle juniper falcon otter badger heron marten lynx city county school college "
    "library museum church station airport hotel cafe bakery garage clinic lawyer bank insurance "
    "energy solar wind water climate weather election budget council policy court police fire "
    "football tennis cricket rugby golf cycling running hiking camping fishing sailing chess"
).split()
_TLDS = ("com", "com", "com", "org", "net", "de", "co.uk", "io", "fr", "nl", "info", "edu", "it", "es")
_SUBDOMAINS = ("www.", "www.", "", "blog.", "shop.", "news.", "docs.", "m.")
_LANGS = ("en", "de", "fr", "es", "it", "nl")


def generate_urls(count: int, seed: int) -> list[str]:
    """``count`` distinct URLs in the shapes a crawler meets (article slugs, dated posts, product
    pages with query strings, tag and search pagination, PHP pages), on ~count/200 hosts whose
    popularity is skewed (a few big hosts, many small ones). Deterministic for a seed."""
    rng = random.Random(seed)
    words = _WORDS
    hosts = []
    for _ in range(max(100, count // 200)):
        name = rng.choice(words) + rng.choice(("", "-", "")) + rng.choice(words)
        scheme = "https" if rng.random() < 0.85 else "http"
        hosts.append(f"{scheme}://{rng.choice(_SUBDOMAINS)}{name}.{rng.choice(_TLDS)}")
    n_hosts = len(hosts)
    seen: set[str] = set()
    out: list[str] = []
    choice, rand, randrange = rng.choice, rng.random, rng.randrange
    while len(out) < count:
        base = hosts[int(n_hosts * rand() ** 2)]
        t = rand()
        if t < 0.30:
            path = f"/{choice(words)}/{choice(words)}-{choice(words)}-{choice(words)}-{randrange(1, 10**6)}.html"
        elif t < 0.50:
            path = (f"/{randrange(2005, 2027)}/{randrange(1, 13):02d}/{randrange(1, 29):02d}/"
                    f"{choice(words)}-{choice(words)}-{choice(words)}/")
        elif t < 0.65:
            path = f"/product/{randrange(1, 10**7)}?color={choice(words)}&size={randrange(1, 50)}"
        elif t < 0.80:
            path = f"/tag/{choice(words)}/page/{randrange(1, 500)}"
        elif t < 0.90:
            path = f"/search?q={choice(words)}+{choice(words)}&page={randrange(1, 100)}"
        else:
            path = f"/{choice(words)}/{choice(words)}/index.php?id={randrange(1, 10**6)}&lang={choice(_LANGS)}"
        url = base + path
        if url not in seen:
            seen.add(url)
            out.append(url)
    return out


# --------------------------------------------------------------------------- (a) false-positive rate

def max_urls_within(max_mb: int, fpr: float) -> int:
    """How many URLs a filter of at most ``max_mb`` MiB holds at ``fpr`` (beyond it, the cap binds)."""
    return int(max_mb * 2**20 * 8 * math.log(2) ** 2 / -math.log(fpr))


def measure_filter(bloom: Any, added: list[str], probes: list[str], fpr: float, label: str) -> dict[str, Any]:
    """Add ``added`` to the empty ``bloom``, then probe: absent URLs (false positives) and a sample
    of present ones (false negatives); timings in ns per URL."""
    n = len(added)
    clock = time.perf_counter
    cpu = time.process_time  # CPU seconds of this process: much less sensitive to a loaded machine
    t, c = clock(), cpu()
    bloom.add_many(added)
    add_s, add_cpu = clock() - t, cpu() - c
    false_pos = 0
    t, c = clock(), cpu()
    for url in probes:
        if url in bloom:
            false_pos += 1
    absent_s, absent_cpu = clock() - t, cpu() - c
    present = added[:: max(1, n // FN_SAMPLE)]
    false_neg = 0
    t, c = clock(), cpu()
    for url in present:
        if url not in bloom:
            false_neg += 1
    present_s, present_cpu = clock() - t, cpu() - c
    expected = bloom.expected_fpr(n)
    observed = false_pos / len(probes)
    mean = expected * len(probes)  # false positives are ~Poisson(mean)
    return {
        "label": label, "n": n, "fpr_configured": fpr, "num_bits": bloom.num_bits, "num_hashes": bloom.num_hashes,
        "nbytes": bloom.nbytes, "mib": bloom.nbytes / 2**20, "serialised_bytes": len(bloom.to_bytes()),
        "bits_per_url": bloom.num_bits / n, "expected_fpr": expected, "observed_fpr": observed,
        "false_positives": false_pos, "probes": len(probes), "sigma_fpr": math.sqrt(mean) / len(probes),
        "z": (false_pos - mean) / math.sqrt(mean) if mean > 0 else None,
        "ns_per_add": add_s / n * 1e9, "ns_per_lookup_absent": absent_s / len(probes) * 1e9,
        "ns_per_lookup_present": present_s / len(present) * 1e9,
        "cpu_ns_per_add": add_cpu / n * 1e9, "cpu_ns_per_lookup_absent": absent_cpu / len(probes) * 1e9,
        "cpu_ns_per_lookup_present": present_cpu / len(present) * 1e9,
        "present_checked": len(present), "false_negatives": false_neg,
    }


def run_fpr(args: argparse.Namespace, urls: list[str], probes: list[str], cfg: Any, check,
            built: dict[tuple[int, int, int], Any]) -> dict[str, Any]:
    """(a); filters of ``args.spark_urls`` URLs are left in ``built`` by (n, m, k) for (b)."""
    from crawl.net.bloom import BloomFilter
    from jobs.engine.seen_filter import HEADROOM, MIN_FILTER_CAPACITY
    max_mb = int(cfg["discovery.bloom_max_mb"])
    rows = []

    def judge(r: dict[str, Any]) -> None:
        fp, mean, p = r["false_positives"], r["expected_fpr"] * r["probes"], r["fpr_configured"]
        check(r["false_negatives"] == 0, f"{r['label']}: {r['false_negatives']} false negatives "
                                         f"of {r['present_checked']} added URLs")
        check(abs(fp - mean) <= SIGMAS * math.sqrt(mean) + 1,
              f"{r['label']}: {fp} false positives in {r['probes']} probes, expected {mean:.1f} "
              f"(expected_fpr {r['expected_fpr']:.3g}) within {SIGMAS:g} sigma")
        limit = p * r["probes"] + SIGMAS * math.sqrt(p * r["probes"])
        check(fp <= limit, f"{r['label']}: observed rate {r['observed_fpr']:.3g} not above the configured "
                           f"{p:g} beyond {SIGMAS:g} sigma ({fp} <= {limit:.0f} false positives)")

    for fpr in args.fprs:
        for n in args.sizes:
            label = f"n={n:,} fpr={fpr:g}"
            bloom = BloomFilter.for_capacity(n, fpr)
            r = measure_filter(bloom, urls[:n], probes, fpr, label)
            r.update(sizing="for_capacity(n, fpr)", capacity=n)
            if n == args.spark_urls:  # (b) compares the Spark-built filter with one built here
                built[(n, bloom.num_bits, bloom.num_hashes)] = bloom
            judge(r)
            rows.append(r)
            print(f"bench: (a) {label}: observed {r['observed_fpr']:.5f}, expected {r['expected_fpr']:.5f}, "
                  f"{r['mib']:.2f} MiB, {r['ns_per_add']:.0f} ns/add, "
                  f"{r['ns_per_lookup_absent']:.0f} ns/lookup", flush=True)
    # production sizing, as a full build in jobs/engine/seen_filter.py: max(HEADROOM n, MIN_FILTER_CAPACITY) at
    # most bloom_max_mb
    production = []
    for fpr in args.fprs:
        for n in args.sizes:
            capacity = max(HEADROOM * n, MIN_FILTER_CAPACITY)
            bloom = BloomFilter.for_capacity(capacity, fpr, max_mb * 2**20)
            same = next((r for r in rows if r["n"] == n and r["fpr_configured"] == fpr
                         and r["num_bits"] == bloom.num_bits and r["num_hashes"] == bloom.num_hashes), None)
            if same is not None:  # the same shape was measured above: no need to do it twice
                production.append(dict(same, label=f"production n={n:,} fpr={fpr:g}", capacity=capacity,
                                       sizing="same shape as for_capacity(n, fpr)"))
                continue
            label = f"production n={n:,} fpr={fpr:g}"
            r = measure_filter(bloom, urls[:n], probes, fpr, label)
            if n == args.spark_urls:
                built[(n, bloom.num_bits, bloom.num_hashes)] = bloom
            r.update(sizing=f"for_capacity(max({HEADROOM} n, {MIN_FILTER_CAPACITY:,}), fpr, {max_mb} MiB)", capacity=capacity)
            judge(r)
            production.append(r)
            print(f"bench: (a) {label} (capacity {capacity:,}): observed {r['observed_fpr']:.2g}, "
                  f"expected {r['expected_fpr']:.2g}, {r['mib']:.2f} MiB", flush=True)
    return {"rows": rows, "production": production, "min_filter_capacity": MIN_FILTER_CAPACITY,
            "bloom_max_mb": max_mb,
            "max_urls_within_cap": {f"{fpr:g}": max_urls_within(max_mb, fpr) for fpr in args.fprs}}


# --------------------------------------------------------------------------- (b) Spark build

def run_spark(args: argparse.Namespace, spark: Any, cfg: Any, workdir: str, urls: list[str], probes: list[str],
              check, built: dict[tuple[int, int, int], Any]) -> dict[str, Any]:
    from crawl.net.bloom import BloomFilter
    from jobs.engine.seen_filter import HEADROOM, MIN_FILTER_CAPACITY, seen_filter
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.reads import read_url_state
    n = args.spark_urls
    root = CrawlRoot(os.path.join(workdir, "crawl"))
    text = os.path.join(workdir, "urls.txt")
    with open(text, "w", encoding="utf-8") as fh:
        fh.write("\n".join(urls[:n]))
        fh.write("\n")
    files = int(cfg["spark.shuffle_partitions"])
    t = time.perf_counter()
    (spark.read.text(text).withColumnRenamed("value", "url").repartition(files)
     .write.format("delta").save(root.crawldb))
    spark.sql(f"ALTER TABLE delta.`{root.crawldb}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    write_s = time.perf_counter() - t
    os.remove(text)
    partitions = read_url_state(spark, root).select("url").rdd.getNumPartitions()
    print(f"bench: (b) wrote {n:,} URLs to {root.crawldb} in {write_s:.1f}s ({files} files, "
          f"read back as {partitions} partitions)", flush=True)
    seen_dir = os.path.join(root.root, "seen_filter")
    builds = []
    seen = None
    for i in range(args.builds):
        shutil.rmtree(seen_dir, ignore_errors=True)  # no stored filter: a full build
        t = time.perf_counter()
        seen = seen_filter(spark, root, cfg)
        builds.append(time.perf_counter() - t)
        print(f"bench: (b) full build #{i + 1}: {builds[-1]:.2f}s", flush=True)
    out: dict[str, Any] = {"urls": n, "files": files, "partitions": partitions, "write_s": write_s,
                           "build_s": builds, "build_s_median": sorted(builds)[len(builds) // 2]}
    if seen is None:
        check(False, "seen_filter returned None (discovery.bloom_fpr is 0)")
        return out
    check(seen.how == "built", f"with no stored filter it is built from the crawldb (got {seen.how!r})")
    bloom = BloomFilter.from_bytes(seen.data)
    out.update(filter_urls=seen.urls, nbytes=seen.nbytes, mib=seen.nbytes / 2**20, serialised_bytes=len(seen.data),
               num_bits=bloom.num_bits, num_hashes=bloom.num_hashes, expected_fpr=seen.expected_fpr,
               capacity=max(HEADROOM * n, MIN_FILTER_CAPACITY), fpr_configured=float(cfg["discovery.bloom_fpr"]),
               count_header=bloom.count)
    check(seen.urls == n, f"seen filter counted {seen.urls} crawldb URLs, expected {n}")
    # the same shape built here from the same URLs must give the same bits (OR of per-partition filters)
    local = built.get((n, bloom.num_bits, bloom.num_hashes))
    if local is None:  # (a) did not build this shape
        local = BloomFilter(bloom.num_bits, bloom.num_hashes)
        local.add_many(urls[:n])
    identical = local.to_bytes()[24:] == seen.data[24:]
    out["bits_identical_to_local_build"] = identical
    check(identical, "the Spark-built filter's bits equal a filter of the same shape built in one process")
    sample = [r["url"] for r in read_url_state(spark, root).select("url")
              .sample(fraction=min(1.0, 1.5 * SPARK_SAMPLE_ROWS / n), seed=7).limit(SPARK_SAMPLE_ROWS).collect()]
    missing = sum(1 for u in sample if u not in bloom)
    out.update(sample_rows=len(sample), sample_false_negatives=missing)
    check(missing == 0 and len(sample) > 0,
          f"{missing} false negatives among {len(sample)} crawldb rows read back (expected 0)")

    false_pos = sum(1 for u in probes if u in bloom)
    out.update(probes=len(probes), false_positives=false_pos, observed_fpr=false_pos / len(probes))
    print(f"bench: (b) filter {out['mib']:.2f} MiB, {seen.urls:,} URLs, observed fpr {out['observed_fpr']:.5f}",
          flush=True)

    # the next cycle: the stored filter as it is, then brought up to date with a cycle's new URLs
    t = time.perf_counter()
    stored = seen_filter(spark, root, cfg)
    out["stored_s"] = time.perf_counter() - t
    check(stored.how == "stored" and stored.data == seen.data, "an unchanged crawldb's filter is the stored one")
    added, probes = probes[-args.spark_added:], probes[:-args.spark_added]  # never in the table: still absent
    spark.createDataFrame([(u,) for u in added], "url string").repartition(files) \
        .write.format("delta").mode("append").save(root.crawldb)
    t = time.perf_counter()
    updated = seen_filter(spark, root, cfg)
    out["update_s"] = time.perf_counter() - t
    print(f"bench: (b) stored {out['stored_s']:.2f}s; {len(added):,} URLs appended, brought up to date in "
          f"{out['update_s']:.2f}s", flush=True)
    check(updated.how == "updated" and updated.added == len(added) and updated.urls == n + len(added),
          f"{len(added)} appended URLs are added from the change data (got {updated.how}, +{updated.added})")
    local.add_many(added)
    check(local.to_bytes()[24:] == updated.data[24:],
          "the updated filter's bits equal the same shape built in one process from all its URLs")
    shutil.rmtree(seen_dir, ignore_errors=True)
    t = time.perf_counter()
    rebuilt = seen_filter(spark, root, cfg)
    out["rebuild_s"] = time.perf_counter() - t
    check(rebuilt.how == "built" and rebuilt.urls == n + len(added), "the full build counts the appended URLs too")
    out.update(added=len(added), update_over_build=out["update_s"] / out["rebuild_s"])
    print(f"bench: (b) full build of {n + len(added):,} URLs {out['rebuild_s']:.2f}s: up to date in "
          f"{out['update_over_build']:.2f} of the time", flush=True)
    return out


# --------------------------------------------------------------------------- (c) a real crawl, filter on and off

def segment_figures(spark: Any, root: Any, segment_id: str) -> dict[str, Any]:
    """What left the fetch tasks in this segment, from its fetched Parquet."""
    from pyspark.sql import functions as F
    fetched = spark.read.parquet(root.fetched(segment_id))
    u = (fetched.filter("kind = 'url'")
         .agg(F.count("*").alias("url_rows"),
              F.sum(F.when(F.col("outlinks").isNotNull(), F.size("outlinks")).otherwise(0)).alias("outlink_rows"),
              F.sum(F.expr("coalesce(aggregate(outlinks, 0L, (acc, x) -> acc + length(x)), 0L)"))
              .alias("outlink_chars"))
         .collect()[0])
    h = (fetched.filter("kind = 'host'")
         .agg(F.count("*").alias("host_rows"),
              F.sum(F.expr("coalesce(try_element_at(link_rejects, 'known'), 0L)")).alias("known"),
              F.sum(F.coalesce("links_found", F.lit(0))).alias("links_found"),
              F.sum(F.coalesce("links_kept", F.lit(0))).alias("links_kept"),
              F.sum(F.expr("coalesce(size(sitemap_entries), 0)")).alias("sitemap_entries"))
         .collect()[0])
    urls = sorted(r["url"] for r in fetched.filter("kind = 'url'").select("url").collect())
    return {**{k: int(u[k] or 0) for k in ("url_rows", "outlink_rows", "outlink_chars")},
            **{k: int(h[k] or 0) for k in ("host_rows", "known", "links_found", "links_kept", "sitemap_entries")},
            "_urls": urls}


def run_crawl(args: argparse.Namespace, spark: Any, workdir: str, check) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from crawl.config import build_config
    from crawl.devweb.web import DevWeb
    import jobs.fetch as fetch_job
    from jobs import dedup, fetch, generate, inject, update
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.reads import read_host_state, read_url_state

    web = DevWeb(hosts=args.hosts, pages_per_host=args.pages, port=0, crawl_delay_s=0)
    web.start()
    try:
        seeds_path = os.path.join(workdir, "seeds.txt")
        with open(seeds_path, "w", encoding="utf-8") as fh:
            fh.writelines(u + "\n" for u in web.seed_urls())
        base = {"fetch.delay_s": 0.0, "generate.max_urls_per_host": args.pages,
                "fetch.allow_networks": devweb_networks(args.hosts)}  # the guard refuses loopback
        runs = {"on": {"cfg": build_config(overrides=base)},
                "off": {"cfg": build_config(overrides={**base, "discovery.bloom_fpr": 0.0})}}
        for name, run in runs.items():
            run["root"] = CrawlRoot(os.path.join(workdir, f"crawl-{name}"))
            run["cycles"] = []
            run["bloom_fpr"] = float(run["cfg"]["discovery.bloom_fpr"])

        # time the filter build inside the fetch step (fetch.run calls the module-level name)
        builds: list[dict[str, Any]] = []
        original = fetch_job.seen_filter

        def timed_build(spark_, root_, cfg_):
            t = time.perf_counter()
            seen = original(spark_, root_, cfg_)
            builds.append({"seconds": time.perf_counter() - t, "urls": seen.urls if seen else None,
                           "nbytes": seen.nbytes if seen else None,
                           "expected_fpr": seen.expected_fpr if seen else None,
                           "how": seen.how if seen else None})
            return seen

        fetch_job.seen_filter = timed_build
        try:
            for run in runs.values():
                t = time.perf_counter()
                inj = inject.run(spark, run["cfg"], run["root"], seeds_path)
                run["inject"] = {"seconds": time.perf_counter() - t, "rows": inj.inserted}
            for c in range(1, args.cycles + 1):
                order = ("on", "off") if c % 2 else ("off", "on")
                for name in order:
                    run, cfg, root = runs[name], runs[name]["cfg"], runs[name]["root"]
                    if run.get("stopped"):
                        continue
                    cyc: dict[str, Any] = {"cycle": c}
                    t = time.perf_counter()
                    gen = generate.run(spark, cfg, root)
                    cyc["generate_s"] = time.perf_counter() - t
                    if gen.segment_id is None:
                        run["stopped"] = c
                        print(f"bench: (c) {name}: cycle {c}: nothing due", flush=True)
                        continue
                    n0, b0 = len(web.requests()), len(builds)
                    t = time.perf_counter()
                    fet = fetch.run(spark, cfg, root, gen.segment_id)
                    cyc["fetch_s"] = time.perf_counter() - t
                    log = web.requests()[n0:]
                    cyc["filter"] = builds[b0] if len(builds) > b0 and builds[b0]["urls"] is not None else None
                    t = time.perf_counter()
                    ded = dedup.run(spark, cfg, root, gen.segment_id)
                    cyc["dedup_s"] = time.perf_counter() - t
                    cyc["duplicates"] = ded.exact + ded.near
                    t = time.perf_counter()
                    upd = update.run(spark, cfg, root, gen.segment_id)
                    cyc["update_s"] = time.perf_counter() - t
                    kinds = collections.Counter(
                        "robots" if e["path"] == "/robots.txt" else "sitemap" if e["path"] == "/sitemap.xml"
                        else "page" for e in log)
                    cyc.update(segment_id=gen.segment_id, generated=gen.urls, attempted=fet.urls,
                               by_fetch_status=fet.by_fetch_status, new_urls=upd.new_urls,
                               web_requests=dict(kinds), **segment_figures(spark, root, gen.segment_id))
                    run["cycles"].append(cyc)
                    fb = cyc["filter"]
                    built = f" (filter {fb['seconds']:.1f}s)" if fb and fb["urls"] is not None else ""
                    print(f"bench: (c) {name} cycle {c}: {fet.urls} fetched, {cyc['outlink_rows']} outlink rows "
                          f"left the tasks, {cyc['known']} dropped as known, {upd.new_urls} new; fetch "
                          f"{cyc['fetch_s']:.1f}s{built}, dedup {cyc['dedup_s']:.1f}s, update {cyc['update_s']:.1f}s",
                          flush=True)
        finally:
            fetch_job.seen_filter = original

        # the end state of both crawls
        for run in runs.values():
            root = run["root"]
            run["crawldb_urls"] = {r["url"] for r in read_url_state(spark, root).select("url").collect()}
            hk = read_host_state(spark, root).agg(
                F.sum(F.expr("coalesce(try_element_at(link_rejects, 'known'), 0L)")).alias("known"),
                F.sum(F.coalesce("links_kept", F.lit(0))).alias("links_kept")).collect()[0]
            run["hostdb_known"], run["hostdb_links_kept"] = int(hk["known"] or 0), int(hk["links_kept"] or 0)
            run["state"] = {r["url"]: (r["status"], r["depth"], r["inlinks"]) for r in
                            read_url_state(spark, root).select("url", "status", "depth", "inlinks").collect()}
    finally:
        web.stop()

    on, off = runs["on"], runs["off"]
    for name, run in runs.items():
        cycles = run["cycles"]
        run["total"] = {k: sum(c[k] for c in cycles) for k in
                        ("attempted", "outlink_rows", "outlink_chars", "known", "links_found", "links_kept",
                         "new_urls", "duplicates", "fetch_s", "dedup_s", "update_s", "generate_s")}
        run["total"]["filter_s"] = sum(c["filter"]["seconds"] for c in cycles if c.get("filter"))
        check(run["total"]["links_kept"] == run["total"]["outlink_rows"],
              f"{name}: links_kept {run['total']['links_kept']} = outlink rows {run['total']['outlink_rows']}")
        check(run["hostdb_known"] == run["total"]["known"],
              f"{name}: hostdb link_rejects['known'] {run['hostdb_known']} = the segments' sum {run['total']['known']}")
    check(off["total"]["known"] == 0, f"off: {off['total']['known']} links dropped as known (expected 0)")
    for c_on, c_off in zip(on["cycles"], off["cycles"]):
        c = c_on["cycle"]
        same = c_on["_urls"] == c_off["_urls"]
        c_on["same_fetchlist_as_off"] = same
        check(same, f"cycle {c}: both crawls fetched the same URLs ({len(c_on['_urls'])} / {len(c_off['_urls'])})")
        if same:
            check(c_off["outlink_rows"] == c_on["outlink_rows"] + c_on["known"],
                  f"cycle {c}: outlink rows without the filter {c_off['outlink_rows']} = with it "
                  f"{c_on['outlink_rows']} + known {c_on['known']}")
        c_on["kept_out_share"] = c_on["known"] / (c_on["known"] + c_on["outlink_rows"]) \
            if c_on["known"] + c_on["outlink_rows"] else None
    check(len(on["cycles"]) == len(off["cycles"]), f"both crawls ran {len(on['cycles'])} / {len(off['cycles'])} cycles")
    t_on = on["total"]
    t_on["kept_out_share"] = t_on["known"] / (t_on["known"] + t_on["outlink_rows"]) \
        if t_on["known"] + t_on["outlink_rows"] else None
    only_on = sorted(on["crawldb_urls"] - off["crawldb_urls"])
    only_off = sorted(off["crawldb_urls"] - on["crawldb_urls"])
    state_diff = sorted(u for u in on["crawldb_urls"] & off["crawldb_urls"] if on["state"][u] != off["state"][u])
    diff_kinds: collections.Counter = collections.Counter()
    for u in state_diff:
        (s_on, d_on, i_on), (s_off, d_off, i_off) = on["state"][u], off["state"][u]
        if s_on != s_off:
            diff_kinds[f"status {s_on} with the filter, {s_off} without"] += 1
        if d_on != d_off:
            diff_kinds["depth"] += 1
        if i_on != i_off:
            diff_kinds["inlinks"] += 1
    check(not only_on and not only_off,
          f"both crawldbs hold the same URLs ({len(on['crawldb_urls'])} / {len(off['crawldb_urls'])}; "
          f"only with the filter {len(only_on)}, only without {len(only_off)})")
    out = {"hosts": args.hosts, "pages": args.pages, "cycles_requested": args.cycles,
           "config": {k: on["cfg"][k] for k in ("discovery.bloom_fpr", "discovery.bloom_max_mb", "fetch.delay_s",
                                                "generate.max_urls_per_host", "sitemaps.enabled", "fetch.tasks",
                                                "spark.shuffle_partitions")},
           "crawldb_urls": {"on": len(on["crawldb_urls"]), "off": len(off["crawldb_urls"])},
           "only_with_filter": only_on[:50], "only_without_filter": only_off[:50],
           "same_url_state_differs": len(state_diff), "state_diff_kinds": dict(diff_kinds.most_common()),
           "state_diff_examples":
               [(u, on["state"][u], off["state"][u]) for u in state_diff[:10]]}
    for name, run in runs.items():
        out[name] = {"bloom_fpr": run["bloom_fpr"], "inject": run["inject"], "total": run["total"],
                     "hostdb_known": run["hostdb_known"],
                     "cycles": [{k: v for k, v in c.items() if not k.startswith("_")} for c in run["cycles"]]}
    return out


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Measure the seen-URL Bloom filter: false-positive rate, memory, "
                                            "speed, Spark build, rows kept out of the shuffle.")
    p.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    p.add_argument("--sizes", default="100000,1000000", help="URLs added per filter in (a) (default 100000,1000000)")
    p.add_argument("--fprs", default="0.01,0.001", help="configured false-positive rates in (a) (default 0.01,0.001)")
    p.add_argument("--probes", type=int, default=1_000_000, help="absent URLs probed per filter (default 1,000,000)")
    p.add_argument("--spark-urls", type=int, default=1_000_000, help="crawldb rows in (b) (default 1,000,000)")
    p.add_argument("--builds", type=int, default=3, help="full builds in (b) (default 3)")
    p.add_argument("--spark-added", type=int, default=100_000,
                   help="URLs appended to the crawldb in (b) before the stored filter is brought up to date "
                        "(default 100,000)")
    p.add_argument("--hosts", type=int, default=60, help="test web hosts in (c) (default 60)")
    p.add_argument("--pages", type=int, default=40, help="pages per host in (c) (default 40)")
    p.add_argument("--cycles", type=int, default=3, help="crawl cycles in (c) (default 3)")
    p.add_argument("--seed", type=int, default=20261130, help="URL generator seed (default 20261130)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        args.fprs = [float(x) for x in args.fprs.split(",") if x.strip()]
    except ValueError:
        p.error("--sizes takes integers and --fprs numbers, comma-separated")
    if not args.sizes or min(args.sizes) < 1 or not args.fprs or not all(0 < f < 1 for f in args.fprs):
        p.error("--sizes must be >= 1 and --fprs in (0, 1)")
    if min(args.probes, args.spark_urls, args.builds, args.hosts, args.pages, args.cycles) < 1:
        p.error("--probes, --spark-urls, --builds, --hosts, --pages and --cycles must be >= 1")
    args.parts = tuple(args.only) if args.only else PARTS
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from crawl.config import build_config

    facts = machine_facts()
    check = Checker()
    failures = check.failures

    cfg = build_config()
    result: dict[str, Any] = {"benchmark": "bloom", "machine": facts, "parts": list(args.parts),
                              "params": {"sizes": args.sizes, "fprs": args.fprs, "probes": args.probes,
                                         "spark_urls": args.spark_urls, "builds": args.builds, "hosts": args.hosts,
                                         "pages": args.pages, "cycles": args.cycles, "seed": args.seed},
                              "command": "python bench/bloom.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    workdir = tempfile.mkdtemp(prefix="deltacrawl-bench-bloom-", dir="/tmp")
    spark = None
    try:
        urls: list[str] = []
        probes: list[str] = []
        built: dict[tuple[int, int, int], Any] = {}
        if "fpr" in args.parts or "spark" in args.parts:
            need = max(max(args.sizes) if "fpr" in args.parts else 0,
                       args.spark_urls if "spark" in args.parts else 0)
            t = time.perf_counter()
            everything = generate_urls(need + args.probes, args.seed)
            urls, probes = everything[:need], everything[need:]  # distinct, so no probe was added
            del everything
            result["url_generation"] = {"urls": len(urls) + len(probes), "seconds": time.perf_counter() - t,
                                        "mean_chars": sum(map(len, probes)) / len(probes),
                                        "examples": probes[:: max(1, len(probes) // 6)][:6]}
            print(f"bench: generated {len(urls) + len(probes):,} distinct URLs in "
                  f"{result['url_generation']['seconds']:.1f}s", flush=True)
        if "fpr" in args.parts:
            t = time.perf_counter()
            part = run_fpr(args, urls, probes, cfg, check, built)
            part["seconds"] = time.perf_counter() - t
            result["fpr"] = part
        if "spark" in args.parts or "crawl" in args.parts:
            from jobs.engine.session import build_spark
            t = time.perf_counter()
            spark = build_spark(cfg)
            result["spark_start_s"] = time.perf_counter() - t
        if "spark" in args.parts:
            t = time.perf_counter()
            result["spark"] = run_spark(args, spark, cfg, workdir, urls, probes, check, built)
            result["spark"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            result["spark"]["seconds"] = time.perf_counter() - t
        del urls, probes, built
        if "crawl" in args.parts:
            t = time.perf_counter()
            result["loadavg_before_crawl"] = [round(x, 2) for x in os.getloadavg()]
            result["crawl"] = run_crawl(args, spark, workdir, check)
            result["crawl"]["seconds"] = time.perf_counter() - t
    finally:
        release(spark, workdir, args.keep)
    return finish(result, failures, args.out_json, print_report)


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print()
    print("== deltacrawl seen-URL Bloom filter benchmark ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB RAM · python {m['python']} · "
          f"pyspark {m['pyspark']} · delta-spark {m['delta_spark']} · {m['java']} · commit {m['git_commit']}")
    print(f"load average (1/5/15 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')} "
          f"(above {m['nproc']}: other work competed for the cores)")
    if "fpr" in r:
        a = r["fpr"]
        print(f"\n(a) false-positive rate, memory, speed: {r['params']['probes']:,} absent URLs probed per filter; "
              f"lookups of present URLs on a sample of <= {FN_SAMPLE:,}")
        rows = [("filter", "capacity", "m bits", "k", "bits/URL", "MiB", "configured", "expected(n)", "observed",
                 "false pos", "z", "ns/add", "ns/lookup absent", "ns/lookup present", "false neg")]
        cpu_rows = [("filter", "CPU ns/add", "CPU ns/lookup absent", "CPU ns/lookup present")]
        for x in a["rows"] + a["production"]:
            rows.append((x["label"], fmt(x["capacity"]), fmt(x["num_bits"]), str(x["num_hashes"]),
                         fmt(x["bits_per_url"], 2), fmt(x["mib"], 3), f"{x['fpr_configured']:g}",
                         f"{x['expected_fpr']:.3g}", f"{x['observed_fpr']:.3g}", fmt(x["false_positives"]),
                         fmt(x["z"], 2) if x["expected_fpr"] * x["probes"] >= 1 else "-", fmt(x["ns_per_add"], 0), fmt(x["ns_per_lookup_absent"], 0),
                         fmt(x["ns_per_lookup_present"], 0), fmt(x["false_negatives"])))
            cpu_rows.append((x["label"], fmt(x["cpu_ns_per_add"], 0), fmt(x["cpu_ns_per_lookup_absent"], 0),
                             fmt(x["cpu_ns_per_lookup_present"], 0)))
        _table(rows)
        print("ns/... are wall-clock; the same operations in CPU time of this process (less sensitive to load):")
        _table(cpu_rows)
        print(f"production sizing: max(n, MIN_FILTER_CAPACITY = {a['min_filter_capacity']:,}) URLs, at most "
              f"discovery.bloom_max_mb = {a['bloom_max_mb']} MiB, which binds beyond "
              + ", ".join(f"{fmt(v)} URLs at {k}" for k, v in a["max_urls_within_cap"].items()))
    if "spark" in r:
        s = r["spark"]
        print(f"\n(b) build_seen_filter on a Delta crawldb of {fmt(s['urls'])} URLs ({s['files']} files, "
              f"{s['partitions']} read partitions; written in {fmt(s['write_s'], 1)}s)")
        if "mib" in s:
            print(f"  seconds per build: {' / '.join(fmt(x, 2) for x in s['build_s'])} (median {fmt(s['build_s_median'], 2)}); "
                  f"filter {fmt(s['mib'], 3)} MiB (m {fmt(s['num_bits'])}, k {s['num_hashes']}), broadcast "
                  f"{fmt(s['serialised_bytes'])} bytes; expected fpr {s['expected_fpr']:.4g}, observed "
                  f"{s['observed_fpr']:.4g} on {fmt(s['probes'])} absent URLs")
            print(f"  bits identical to a one-process build: {s['bits_identical_to_local_build']}; "
                  f"false negatives among {fmt(s['sample_rows'])} rows read back: {s['sample_false_negatives']}")
    if "crawl" in r:
        c = r["crawl"]
        print(f"\n(c) {c['hosts']} hosts x {c['pages']} pages, {c['cycles_requested']} cycles, filter on "
              f"(bloom_fpr {c['on']['bloom_fpr']:g}) and off, interleaved in one SparkSession")
        rows = [("cycle", "fetched", "outlinks left (off)", "outlinks left (on)", "known dropped (on)", "kept out",
                 "fetch s off/on", "filter s", "dedup s off/on", "update s off/on", "new URLs off/on")]
        for c_on, c_off in zip(c["on"]["cycles"], c["off"]["cycles"]):
            f = c_on.get("filter") or {}
            rows.append((str(c_on["cycle"]), f"{fmt(c_off['attempted'])}/{fmt(c_on['attempted'])}",
                         fmt(c_off["outlink_rows"]), fmt(c_on["outlink_rows"]), fmt(c_on["known"]),
                         f"{100 * c_on['kept_out_share']:.1f} %" if c_on.get("kept_out_share") is not None else "-",
                         f"{fmt(c_off['fetch_s'], 1)}/{fmt(c_on['fetch_s'], 1)}", fmt(f.get("seconds"), 2),
                         f"{fmt(c_off['dedup_s'], 1)}/{fmt(c_on['dedup_s'], 1)}",
                         f"{fmt(c_off['update_s'], 1)}/{fmt(c_on['update_s'], 1)}",
                         f"{fmt(c_off['new_urls'])}/{fmt(c_on['new_urls'])}"))
        t_on, t_off = c["on"]["total"], c["off"]["total"]
        rows.append(("total", f"{fmt(t_off['attempted'])}/{fmt(t_on['attempted'])}", fmt(t_off["outlink_rows"]),
                     fmt(t_on["outlink_rows"]), fmt(t_on["known"]),
                     f"{100 * t_on['kept_out_share']:.1f} %" if t_on.get("kept_out_share") is not None else "-",
                     f"{fmt(t_off['fetch_s'], 1)}/{fmt(t_on['fetch_s'], 1)}", fmt(t_on["filter_s"], 2),
                     f"{fmt(t_off['dedup_s'], 1)}/{fmt(t_on['dedup_s'], 1)}",
                     f"{fmt(t_off['update_s'], 1)}/{fmt(t_on['update_s'], 1)}",
                     f"{fmt(t_off['new_urls'])}/{fmt(t_on['new_urls'])}"))
        _table(rows)
        print(f"  outlink bytes (URL characters) that left the tasks: off {fmt(t_off['outlink_chars'])}, "
              f"on {fmt(t_on['outlink_chars'])}; links found {fmt(t_on['links_found'])}; duplicates dedup found: "
              f"off {' + '.join(fmt(x['duplicates']) for x in c['off']['cycles'])}, "
              f"on {' + '.join(fmt(x['duplicates']) for x in c['on']['cycles'])}")
        first = (c["on"]["cycles"] or [{}])[0].get("filter") or {}
        if first:
            print(f"  filter per cycle: {fmt(first['nbytes'] / 2**20, 2)} MiB (sized for max(crawldb URLs, "
                  f"1,000,000)); expected fpr at the last cycle "
                  f"{(c['on']['cycles'][-1].get('filter') or {}).get('expected_fpr', 0):.3g}")
        print(f"  crawldb URLs at the end: on {fmt(c['crawldb_urls']['on'])}, off {fmt(c['crawldb_urls']['off'])}; "
              f"only with the filter {len(c['only_with_filter'])}, only without {len(c['only_without_filter'])}; "
              f"same URL with another (status, depth, inlinks): {c['same_url_state_differs']}"
              + (" (" + "; ".join(f"{k}: {v}" for k, v in c["state_diff_kinds"].items()) + ")"
                 if c["state_diff_kinds"] else ""))
        for u in c["only_without_filter"][:10]:
            print(f"    only without the filter: {u}")
        for u in c["only_with_filter"][:10]:
            print(f"    only with the filter: {u}")
    print(f"checks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


if __name__ == "__main__":
    sys.exit(main())
