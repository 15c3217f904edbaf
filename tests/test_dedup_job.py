"""jobs/dedup.py through real Spark and Delta, on crafted pages served over loopback: exact
copies (other markup, a new timestamp), near copies (a few words edited), a hot band (thirty
boilerplate-only pages), distinct pages; a second segment meets the first one's canonical pages
in dedup/pages; re-running changes nothing; update applies status duplicate and dup_of and
trusts a duplicate's links less; a duplicate re-checked with new content is released."""
from __future__ import annotations

import asyncio
import random
import threading

import pytest
from aiohttp import web

from jobs import dedup, fetch, generate, inject, update
from jobs.engine.crawl_root import CrawlRoot
from crawl.config import with_values
from tests.conftest import make_config, write_seeds

HOST_A, HOST_B = "127.0.0.61", "127.0.0.62"
BOILERPLATE = 30


def _article(seed: int, words: int = 400) -> list[str]:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    return [rng.choice(vocab) for _ in range(words)]


def _edited(words: list[str], share: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(words)
    for i in rng.sample(range(len(out)), int(len(out) * share)):
        out[i] = "edit" + "".join(rng.choice("xyzw") for _ in range(5))
    return out


def _html(words: list[str], stamp: str = "", links: tuple[str, ...] = (), style: int = 0) -> str:
    nav = '<nav><a href="/">Home</a> About Contact</nav>'
    links_html = "".join(f'<a href="{h}">more</a>' for h in links)
    if style == 0:
        body = f"<article><p>{' '.join(words)}</p></article>"
    else:  # the same text in other markup and whitespace
        half = len(words) // 2
        body = f"<div class=x>\n  <span>{'  '.join(words[:half])}</span>\n<b>{' '.join(words[half:])}</b></div>"
    return f"<html><head><title>t</title><script>var t={random.random()}</script></head><body>{nav}" \
           f"<p>Updated {stamp}</p>{body}{links_html}</body></html>"


ORIGINAL = _article(1)
PAGES = {
    "/orig.html": _html(ORIGINAL, "2026-11-29 10:00", links=("/only-from-orig.html",)),
    "/copy.html": _html(ORIGINAL, "2026-11-30 12:34", links=("/only-from-copy.html",), style=1),
    "/near.html": _html(_edited(ORIGINAL, 0.03, 2), "2026-11-30 09:00"),
    "/only-from-orig.html": _html(_article(50)),
    "/only-from-copy.html": _html(_article(51)),
    "/late.html": _html(_edited(ORIGINAL, 0.02, 3), "2026-12-01"),
    **{f"/other{i}.html": _html(_article(10 + i)) for i in range(5)},
    **{f"/boiler{i}.html": _html([], f"2026-11-{i + 1:02d}") for i in range(BOILERPLATE)},
}
MIRROR = {"/mirror.html": _html(ORIGINAL, "2025-01-01", links=("/elsewhere.html",), style=1)}


@pytest.fixture(scope="module")
def server():
    loop = asyncio.new_event_loop()
    runners = []

    async def start():
        for host, pages in ((HOST_A, PAGES), (HOST_B, MIRROR)):
            async def handle(request, pages=pages):
                if request.path == "/robots.txt":
                    return web.Response(status=404)
                if request.path in pages:
                    return web.Response(text=pages[request.path], content_type="text/html")
                return web.Response(status=404)
            app = web.Application()
            app.router.add_get("/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, 0)
            await site.start()
            runners.append((runner, site._server.sockets[0].getsockname()[1]))

    ready = threading.Event()

    def serve():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    yield {HOST_A: f"http://{HOST_A}:{runners[0][1]}", HOST_B: f"http://{HOST_B}:{runners[1][1]}"}
    for runner, _ in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _cycle(spark, cfg, root):
    seg = generate.run(spark, cfg, root).segment_id
    fetch.run(spark, cfg, root, seg)
    first = dedup.run(spark, cfg, root, seg)
    return seg, first


def _same_answer_from_whole_tables(spark, cfg, root, seg, monkeypatch):
    """dedup of a small segment is decided in memory (dedup.decide_in_memory) from slices of
    dedup/pages and dedup/bands, both tables read whole; decided again in memory from filtered
    reads (as with crawldb.local_read_max_mb = 0), run again by Spark's queries
    (dedup.local_max_pages = 0) on cached slices (dedup.table_slices), and decided by them on
    the whole tables and on the band slice alone, it must find the same duplicates. (One run
    by Spark writes its answer and MERGEs the tables again; the other ways are asked for their
    decision only: what they would write is that decision.)"""
    from jobs.engine.reads import read_delta

    def answer():
        return sorted(tuple(r) for r in spark.read.parquet(root.dedup_result(seg)).collect())
    in_memory = answer()
    known, bands = read_delta(spark, root.dedup_pages, True), read_delta(spark, root.dedup_bands, True)
    filtered = dedup.decide_in_memory(spark, cfg, dedup.fetched_pages(spark, root, seg), known, bands, whole=False)
    assert filtered is not None and sorted(filtered.decision.duplicates) == in_memory, "filtered reads"
    dedup.run(spark, with_values(cfg, {"dedup.local_max_pages": 0}), root, seg)
    assert answer() == in_memory, "by Spark, on the slices"
    known, bands = read_delta(spark, root.dedup_pages, True), read_delta(spark, root.dedup_bands, True)
    pages = dedup.segment_pages(spark, root, seg, known).cache()
    new_bands = dedup.page_bands(spark, pages).cache()
    try:
        for name in ("_SLICE_MAX_PAGES", "_SLICE_MAX_KEYS"):
            slices: list = []
            with monkeypatch.context() as patch:
                patch.setattr(dedup, name, 0)
                _, (dups, _cand, cached) = dedup.decide_by_spark(spark, cfg, pages, new_bands, known, bands, slices)
                try:
                    assert sorted(tuple(r) for r in dups.collect()) == in_memory, name
                finally:
                    for df in (*cached, *slices):
                        df.unpersist()
    finally:
        new_bands.unpersist()
        pages.unpersist()
    return in_memory


def test_dedup_through_spark(spark, server, tmp_path, monkeypatch):
    a, b = server[HOST_A], server[HOST_B]
    seeds = [a + p for p in PAGES if p not in ("/late.html", "/only-from-orig.html", "/only-from-copy.html")]
    seeds.append(b + "/mirror.html")
    cfg = make_config(fetch__delay_s=0.0, dedup__max_band_candidates=10, sitemaps__enabled=False,
                      generate__max_urls_per_host=200)
    root = CrawlRoot(str(tmp_path / "crawl"))
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", seeds))
    seg, first = _cycle(spark, cfg, root)
    result = {r["url"]: r.asDict() for r in spark.read.parquet(root.dedup_result(seg)).collect()}

    group = {a + "/orig.html", a + "/copy.html", a + "/near.html", b + "/mirror.html"}
    fetched = {r["url"]: r["fetched_at"] for r in spark.read.parquet(root.fetched(seg)).collect() if r["url"]}
    canonical = min(group, key=lambda u: (fetched[u], u))  # first fetched wins
    assert set(result) & group == group - {canonical}
    assert all(result[u]["dup_of"] in group for u in group - {canonical})
    same_text = {a + "/orig.html", a + "/copy.html", b + "/mirror.html"}  # other markup, dates, scripts
    for u in group - {canonical}:
        assert result[u]["match"] == ("exact" if {u, result[u]["dup_of"]} <= same_text else "near"), u
    assert not any(f"/other{i}.html" in u for u in result for i in range(5))
    boiler = {a + f"/boiler{i}.html" for i in range(BOILERPLATE)}
    assert len(boiler - set(result)) == 1 and {result[u]["match"] for u in boiler & set(result)} == {"exact"}
    assert first.hot_bands > 0  # the boilerplate pages share every band: left out of the near join

    # every page was new to dedup/pages: both tables were appended to, not MERGEd
    from delta.tables import DeltaTable
    for path in (root.dedup_pages, root.dedup_bands):
        assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "WRITE", path

    # re-running changes nothing
    pages_before = {r["url"] for r in spark.read.format("delta").load(root.dedup_pages).collect()}
    bands_before = sorted(tuple(r) for r in spark.read.format("delta").load(root.dedup_bands).collect())
    again = dedup.run(spark, cfg, root, seg)
    assert {r["url"]: r.asDict() for r in spark.read.parquet(root.dedup_result(seg)).collect()} == result
    assert (again.exact, again.near) == (first.exact, first.near)
    assert {r["url"] for r in spark.read.format("delta").load(root.dedup_pages).collect()} == pages_before
    assert sorted(tuple(r) for r in spark.read.format("delta").load(root.dedup_bands).collect()) == bands_before
    assert canonical in pages_before and not (set(result) & pages_before)
    # an append made again for the segment (a run that died after one table's append, say) adds nothing
    from jobs.engine.reads import read_delta
    known, bands = read_delta(spark, root.dedup_pages, True), read_delta(spark, root.dedup_bands, True)
    small = dedup.decide_in_memory(spark, cfg, dedup.fetched_pages(spark, root, seg), known, bands, root)
    assert not small.all_new  # a re-run finds its pages there: it MERGEs (above)
    dedup.merge_dedup_tables(spark, cfg, root, small.pages, spark.read.parquet(root.dedup_result(seg)), seg,
                             small.new_bands, all_new=True)
    assert {r["url"] for r in spark.read.format("delta").load(root.dedup_pages).collect()} == pages_before
    assert sorted(tuple(r) for r in spark.read.format("delta").load(root.dedup_bands).collect()) == bands_before

    # update applies it: status duplicate, dup_of, and a duplicate's links are trusted less
    update.run(spark, cfg, root, seg)
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    for url, dup in result.items():
        assert rows[url]["status"] == "duplicate" and rows[url]["dup_of"] == dup["dup_of"]
    assert rows[canonical]["status"] == "fetched"
    orig_link, copy_link = rows[a + "/only-from-orig.html"], rows[a + "/only-from-copy.html"]
    from_dup, from_canonical = (copy_link, orig_link) if canonical != a + "/copy.html" else (orig_link, copy_link)
    if canonical in (a + "/orig.html", a + "/copy.html"):
        assert from_dup["score"] == pytest.approx(from_canonical["score"] * float(cfg["dedup.duplicate_link_factor"]))

    # a duplicate is re-checked after schedule.max_interval_s
    dup_url = a + "/near.html" if canonical != a + "/near.html" else a + "/copy.html"
    row = rows[dup_url]
    assert row["status"] == "duplicate" and row["next_fetch_at"] is not None
    assert (row["next_fetch_at"] - row["last_fetched_at"]).total_seconds() == float(cfg["schedule.max_interval_s"])
    # the duplicates of the canonical page, and those of other pages, and when they are due
    orphans = {u: r["next_fetch_at"] for u, r in rows.items()
               if r["status"] == "duplicate" and r["dup_of"] == canonical and u != dup_url}
    others = {u: r["next_fetch_at"] for u, r in rows.items() if r["status"] == "duplicate" and r["dup_of"] != canonical}
    assert orphans and others

    # a later segment holds three things at once (one cycle, not three: each costs a generate, a
    # fetch, a dedup and an update): a near copy meets the canonical page in dedup/pages (dedup
    # compares the segment's 2xx pages with that table, where the canonical page's row stays: its
    # 404 in this segment is no page); the duplicate dup_url, re-checked (time passes: the recheck
    # is due now), has new content; and the canonical page, due again, is gone
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds2.txt", [a + "/late.html"]))
    for url in (dup_url, canonical):
        DeltaTable.forPath(spark, root.crawldb).update(f"url = '{url}'", {"next_fetch_at": "timestamp'2000-01-01'"})
    path = dup_url[len(a):]
    site = PAGES if canonical.startswith(a) else MIRROR
    gone_path = "/" + canonical.split("/", 3)[3]
    old_page, PAGES[path] = PAGES[path], _html(_article(99), "2026-12-02")
    gone = site.pop(gone_path)
    try:
        seg2, _ = _cycle(spark, cfg, root)
    finally:
        PAGES[path] = old_page
        site[gone_path] = gone
    late = {r["url"]: r.asDict() for r in spark.read.parquet(root.dedup_result(seg2)).collect()}
    assert late[a + "/late.html"]["dup_of"] == canonical and late[a + "/late.html"]["match"] == "near"
    assert dup_url not in late  # with new content it is no duplicate
    # the other ways of deciding, on the segment whose page meets an earlier segment's in the tables
    # (the harder case: the slices must find rows the segment did not write)
    assert len(_same_answer_from_whole_tables(spark, cfg, root, seg2, monkeypatch)) == len(late)

    update.run(spark, cfg, root, seg2)
    after = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    # the re-checked duplicate with new content is released
    assert after[dup_url]["status"] == "fetched" and after[dup_url]["dup_of"] is None
    assert dup_url in {r["url"] for r in spark.read.format("delta").load(root.dedup_pages).collect()}
    # the canonical page went away: its duplicates are due at once, not at their long re-check
    assert after[canonical]["status"] == "gone"
    for url, before in orphans.items():
        assert after[url]["status"] == "duplicate" and after[url]["next_fetch_at"] < before, url
    for url, before in others.items():  # duplicates of other pages keep their schedule
        assert after[url]["next_fetch_at"] == before, url


def test_dup_of_chains_end_at_the_canonical_page(spark):
    """X matches Y and Y matches Z (but X not Z): X's dup_of is Z, never the duplicate Y; a
    chain of any length resolves; pages outside chains keep their dup_of."""
    rows = [("x", 1, 0, "y", "near"), ("y", 2, 0, "z", "near"), ("p", 3, 0, "q", "exact"),
            ("c1", 4, 0, "c2", "near"), ("c2", 5, 0, "c3", "near"), ("c3", 6, 0, "c4", "exact"),
            ("c4", 7, 0, "c5", "near"), ("c5", 8, 0, "c6", "near"), ("w", 9, 0, "c3", "near")]
    dups = spark.createDataFrame(rows, "url string, url_hash long, host_bucket int, dup_of string, match string")
    cached = []
    try:
        resolved = {r["url"]: (r["dup_of"], r["match"]) for r in dedup._resolve_chains(dups, cached).collect()}
    finally:
        for df in cached:
            df.unpersist()
    assert resolved == {"x": ("z", "near"), "y": ("z", "near"), "p": ("q", "exact"),
                        **{c: ("c6", m) for c, m in (("c1", "near"), ("c2", "near"), ("c3", "exact"),
                                                     ("c4", "near"), ("c5", "near"))},
                        "w": ("c6", "near")}


def test_duplicates_of_a_changed_lost_or_duplicate_page_are_due_now(spark):
    """update's hint rule: the duplicates of a page that this segment found gone, redirected,
    changed (another text_hash) or itself a duplicate become due now; duplicates of a page
    fetched unchanged, not modified, or failing for now keep their schedule, and so does a
    duplicate fetched in this segment."""
    from datetime import datetime
    later = datetime(2030, 1, 1)
    pages = {"gone": "not_found", "moved": "redirect", "changed": "ok", "same": "ok", "dup": "ok",
             "304": "not_modified", "down": "server_error"}
    state_rows = [(f"u/{p}", i, 0, "fetched", None, 100 + i, later) for i, p in enumerate(pages)]
    state_rows += [(f"d/{p}", 50 + i, 0, "duplicate", f"u/{p}", 200 + i, later) for i, p in enumerate(pages)]
    state_rows.append(("d/fetched-too", 99, 0, "duplicate", "u/gone", 299, later))
    url_state = spark.createDataFrame(state_rows, "url string, url_hash long, host_bucket int, status string, "
                                                  "dup_of string, text_hash long, next_fetch_at timestamp")
    text = {"changed": 999, "same": 103, "dup": 104}  # "same" and "dup" keep their text_hash (100 + index)
    outcome_rows = [(f"u/{p}", i, fs, text.get(p), "u/other" if p == "dup" else None)
                    for i, (p, fs) in enumerate(pages.items())]
    outcome_rows.append(("d/fetched-too", 99, "ok", 5, None))
    outcomes = spark.createDataFrame(outcome_rows, "url string, url_hash long, fetch_status string, "
                                                   "text_hash long, dup_of string")
    hints = {r["url"] for r in update.orphaned_duplicates(url_state, outcomes, 1_700_000_000.0).collect()}
    assert hints == {"d/gone", "d/moved", "d/changed", "d/dup"}


def _page_rows(spark, n, segment_id):
    from jobs.engine.schemas import DEDUP_PAGES_SCHEMA
    import datetime as dt
    when = dt.datetime(2026, 12, 1)
    return spark.createDataFrame([(f"http://127.0.0.63/{i}", i, i % 16, 1000 + i, 7 * i, None, 1.0, when, segment_id)
                                  for i in range(n)], DEDUP_PAGES_SCHEMA)


@pytest.mark.parametrize("min_mb", [0.001, 16])
def test_dedup_pages_merge_marks_rows_instead_of_rewriting_the_table(spark, tmp_path, min_mb):
    """dedup/pages is written by every dedup and grows with the crawl: once it is larger than
    crawldb.deletion_vectors_min_mb its MERGE must write what changed (deletion vectors), not copy
    every other row of each file it touches (without them, each of eleven cycles over a 200 k-URL
    root rewrote the whole table, up to 70 MB, to change ~10,000 rows: BENCHMARKS.md "Ten cycles,
    then maintenance"). Below that size (this table is ~10 KB) it rewrites the file it touches,
    which is cheaper there; the answer is the same. A table made before that gets the property
    once."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    from jobs.engine.schemas import DEDUP_PAGES_SCHEMA
    from jobs.engine.tables import ensure_dedup_tables
    root = CrawlRoot(str(tmp_path / "crawl"))
    # an older crawl root's dedup/pages: no deletion vectors
    DeltaTable.create(spark).location(root.dedup_pages).addColumns(DEDUP_PAGES_SCHEMA).execute()
    ensure_dedup_tables(spark, root)
    ensure_dedup_tables(spark, root)
    history = DeltaTable.forPath(spark, root.dedup_pages).history().collect()
    assert [r["operation"] for r in history].count("SET TBLPROPERTIES") == 1
    _page_rows(spark, 200, "old").coalesce(1).write.format("delta").mode("append").save(root.dedup_pages)

    # a segment re-fetched two known pages (one still canonical, one now a duplicate) and one new page
    pages = (_page_rows(spark, 3, "seg").filter("url_hash IN (0, 1)")
             .unionByName(_page_rows(spark, 300, "seg").filter("url_hash = 250"))
             .select("url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score",
                     F.unix_seconds("first_fetched_at").cast("double").alias("first")))
    dups = pages.filter("url_hash = 1").select("url_hash", "url")
    dedup.merge_dedup_tables(spark, make_config(crawldb__deletion_vectors_min_mb=min_mb), root, pages, dups, "seg")
    merge = next(r for r in DeltaTable.forPath(spark, root.dedup_pages).history().collect() if r["operation"] == "MERGE")
    metrics = merge["operationMetrics"]
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"], metrics["numTargetRowsInserted"]) == \
        ("1", "1", "1")
    if min_mb < 0.01:  # the table is larger: rows are marked, none copied
        assert metrics["numTargetRowsCopied"] == "0" and int(metrics["numTargetDeletionVectorsAdded"]) >= 1
    else:  # smaller: the one file is rewritten, its 198 other rows copied
        assert int(metrics["numTargetRowsCopied"]) == 198 and int(metrics["numTargetDeletionVectorsAdded"]) == 0
    assert spark.conf.get("spark.databricks.delta.merge.deletionVectors.persistent", None) is None  # put back
    after = {r["url_hash"]: r["segment_id"] for r in spark.read.format("delta").load(root.dedup_pages).collect()}
    assert len(after) == 200 and after[0] == "seg" and 1 not in after and after[250] == "seg"


def _fingerprints(rng, n_bases):
    """Pages drawn around a few base fingerprints, so that every path of the decision is taken:
    equal texts, SimHash neighbours within and just beyond max_hamming (chains among them),
    MinHash signatures sharing a band with a high or a low share of equal values, ties of first
    fetch time and score."""
    bases = [(rng.getrandbits(64), [rng.getrandbits(63) for _ in range(64)]) for _ in range(n_bases + 3)]

    def page(i, prefix, base=None, exact=False):
        b = rng.randrange(n_bases) if base is None else base
        simhash, values = bases[b]
        text = 100 + b  # an exact copy: its fingerprints are the base's too (exact and near at once)
        if not exact and rng.random() < 0.7:
            text = rng.randrange(12)
            for bit in rng.sample(range(64), rng.choice([0, 0, 1, 2, 3, 4, 5, 7, 20])):
                simhash ^= 1 << bit
            values = list(values)
            for j in rng.sample(range(64), rng.choice([0, 3, 10, 25, 40, 64])):
                values[j] = rng.getrandbits(63)
        signed = simhash - (1 << 64) if simhash >= 1 << 63 else simhash
        return {"url": f"http://127.0.0.64/{prefix}{i}" + "x" * rng.randrange(3), "url_hash": 10_000 + i,
                "host_bucket": i % 4, "text_hash": text, "simhash": signed,
                "signature": b"".join(v.to_bytes(8, "big") for v in values) if rng.random() < 0.9 else None,
                "score": rng.choice([0.5, 1.0, 2.0]), "first": float(1_764_000_000 + rng.randrange(4))}
    return page


@pytest.mark.parametrize("seed", [1, 2])
def test_in_memory_decision_is_the_spark_decision(spark, seed):
    """crawl/dedup/in_memory.decide and jobs/dedup.duplicates give the same duplicates, dup_of,
    match kinds, band collisions and hot values on the same pages, dedup/pages and dedup/bands:
    a segment meeting earlier pages, a page fetched again (its old rows stale), hot band values."""
    import datetime as dt
    from crawl.dedup.in_memory import decide
    from crawl.dedup.rules import band_rows
    from jobs.engine.schemas import DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA
    rng = random.Random(seed)
    page = _fingerprints(rng, 4)
    earlier = [page(i, "old") for i in range(40)]
    segment = [page(i, "new") for i in range(40, 80)]
    # a page fetched again, changed beyond recognition: its dedup/pages and band rows are stale,
    # and a copy of its old text meets only those (a stale pair, dropped: not a duplicate)
    solo = page(90, "solo", base=4, exact=True)
    earlier.append(solo)
    again = dict(page(90, "solo", base=5, exact=True), url=solo["url"], first=solo["first"])
    copy = dict(page(91, "copy", base=4, exact=True), text_hash=solo["text_hash"] + 1000, first=solo["first"] + 10)
    # and a page with its old text: an exact copy of nothing the tables still hold for it
    old_text = dict(page(92, "text", base=6, exact=True), text_hash=solo["text_hash"], first=solo["first"] + 10)
    segment += [again, copy, old_text]
    cfg = make_config(dedup__max_band_candidates=8)
    new_bands = [(p["url_hash"], p["url"], b, v, p["simhash"]) for p in segment
                 for b, v in band_rows(p["simhash"], p["signature"])]
    old_bands = [(b, v, p["url_hash"], p["url"], p["simhash"]) for p in earlier
                 for b, v in band_rows(p["simhash"], p["signature"])]
    mine = decide(segment, earlier, new_bands, old_bands, int(cfg["dedup.max_hamming"]),
                  float(cfg["dedup.min_jaccard"]), int(cfg["dedup.max_band_candidates"]))

    columns = ("url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score", "first")
    pages = spark.createDataFrame([tuple(p[c] for c in columns) for p in segment],
                                  "url string, url_hash long, host_bucket int, text_hash long, simhash long, "
                                  "signature binary, score double, first double")
    known = spark.createDataFrame([(*(p[c] for c in columns[:-1]), dt.datetime.fromtimestamp(p["first"]), "old")
                                   for p in earlier], DEDUP_PAGES_SCHEMA)
    bands = spark.createDataFrame(old_bands, DEDUP_BANDS_SCHEMA)
    dups, cand, cached = dedup.duplicates(spark, pages, known, bands, cfg)
    try:
        theirs = sorted(tuple(r) for r in dups.collect())
    finally:
        for df in cached:
            df.unpersist()
    assert mine.duplicates == theirs
    assert (mine.collisions, mine.hot_values) == (cand.collisions, cand.hot_values)
    kinds = {d[4] for d in mine.duplicates}
    dup_urls = {d[0] for d in mine.duplicates}
    assert kinds == {"exact", "near"} and mine.hot_values > 0 and mine.collisions > 0
    assert any(d[3] in {p["url"] for p in earlier} for d in mine.duplicates)  # met an earlier page
    assert not any(d[3] in dup_urls for d in mine.duplicates)  # chains resolved
    assert copy["url"] not in dup_urls and old_text["url"] not in dup_urls  # met only stale rows
