"""dedup — find the exact and near duplicates among a fetched segment's pages.

Runs between fetch and update, so update applies everything in its one crawldb MERGE: the
duplicates' status and dup_of, and a lower score for the links they carry (their links are
trusted less: dedup.duplicate_link_factor).

Inputs:   <crawl_root>/segments/<id>/fetched (2xx pages with text fingerprints, computed in the
          fetch task), <crawl_root>/dedup/pages and dedup/bands (Delta: canonical pages of
          earlier segments and their band rows).
How:      exact duplicates: equal text_hash (hash of the normalised text: markup, whitespace,
          dates and counters do not defeat it). Near duplicates (crawl/dedup/rules.py): pages sharing
          a SimHash band (4 x 16 bits) or a MinHash band (8 x 8 values) are candidates — an
          equi-join on (band, value), never all pairs. A SimHash candidate is a duplicate within
          dedup.max_hamming bits, decided in the join (never in Python: chance alone gives ~300
          such candidates per page against 5 M pages); a MinHash candidate also when its
          estimated Jaccard is >= dedup.min_jaccard (crawl.dedup.rules.confirm). A band value shared
          by more than dedup.max_band_candidates pages (boilerplate-only pages) is skipped, so a
          hot band cannot explode the join; pages without text are never compared. Each duplicate
          gets dup_of = the canonical page among its duplicates (first fetched wins, then higher
          score, shorter URL), followed to the end of any chain (X matches Y, Y matches Z: X's
          dup_of is Z), so dup_of never names a duplicate. A segment of up to
          dedup.local_max_pages pages is decided on the driver from the rows of the two tables it
          can meet (decide_in_memory, crawl/dedup/in_memory.py: the same rules, without a dozen
          planned queries); one of up to 10,000 pages by Spark on a cached slice of the tables
          (table_slices); a larger one by Spark on the tables.
Outputs:  <crawl_root>/segments/<id>/dedup (Parquet: url, url_hash, host_bucket, dup_of, match),
          then one MERGE into dedup/pages and one into dedup/bands (the segment's canonical pages
          in, their old band rows replaced; duplicates out); an append to each instead when a
          segment decided in memory has no page in dedup/pages yet (nothing to replace). Markers
          segments/<id>/_dedup_started and _deduped (see "Re-run").
Re-run:   safe: the result is recomputed and gives the same answer (the canonical rule is the
          same whether the other page is new or already in dedup/pages), and the MERGEs apply
          the same rows again; an append is made once per table and segment (Delta's idempotent
          write), and a re-run that finds the pages there MERGEs. Refused once the segment is
          updated. When dedup starts it removes the marker segments/<id>/_deduped and writes
          _dedup_started; it writes _deduped once both commits are in. update refuses a segment
          with the first marker and not the second (a dedup that died before or between its writes
          would otherwise lose the segment's band rows for good, since dedup refuses an updated
          segment), and running dedup again completes it.
Exit:     0 done · 2 unknown segment / not fetched / already updated · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/dedup.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StructField, StructType

from crawl.config import Config
from crawl.dedup.in_memory import Decision, decide
from crawl.dedup.rules import (BANDS_PER_PAGE, EXACT, NEAR, SIMHASH_BANDS, band_collisions, band_rows, canonical_key,
                               first_fetched_rule, hamming, is_cool_band, is_near_duplicate)
from crawl.crawldb.status import FetchStatus
from jobs.engine.column_ops import COLUMN_OPS
from jobs.engine.commit_info import writes_commits
from jobs.engine.runtime import run_segment_step
from jobs.engine.errors import UserError
from jobs.engine.crawl_root import CrawlRoot, delete_path, path_exists, write_marker
from jobs.engine.reads import arrow_rows, fits_driver, read_delta, whole_arrow
from jobs.engine.schemas import DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA, from_epoch_col, to_epoch
from jobs.engine.tables import ensure_dedup_tables
from jobs.engine.writes import append_once, local_merge_sources, merge_mode, run_concurrently, txn_app_id

_PAGE_COLUMNS = ("url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score", "first")
_BAND_ROW = "url_hash long, url string, band int, value long, simhash long"
_RESULT_SCHEMA = "url string, url_hash long, host_bucket int, dup_of string, match string"


@dataclass
class DedupResult:
    segment_id: str
    pages: int = 0
    exact: int = 0
    near: int = 0
    candidate_pairs: int = 0   # band collisions: a pair counts once for each band it shares
    hot_bands: int = 0

    def summary(self) -> str:
        return (f"segment {self.segment_id}: {self.pages} pages with text, {self.exact} exact and {self.near} "
                f"near duplicates ({self.candidate_pairs} band collisions, {self.hot_bands} hot band values skipped)")


def fetched_pages(spark: SparkSession, root: CrawlRoot, segment_id: str) -> DataFrame:
    """The segment's 2xx pages that have text (_PAGE_COLUMNS, with this fetch's fetched_at for ``first``)."""
    fetched = spark.read.parquet(root.fetched(segment_id))
    return (fetched.filter((F.col("kind") == "url") & (F.col("fetch_status") == FetchStatus.OK)
                           & F.col("simhash").isNotNull() & F.col("text_hash").isNotNull())
            .select(*_PAGE_COLUMNS[:-1], "fetched_at"))


def segment_pages(spark: SparkSession, root: CrawlRoot, segment_id: str, known: DataFrame) -> DataFrame:
    """The segment's 2xx pages that have text, with ``first`` = when the URL was first fetched
    (from dedup/pages if it is there already, else this fetch), as epoch seconds."""
    return with_first(fetched_pages(spark, root, segment_id), known)


def with_first(pages: DataFrame, known: DataFrame) -> DataFrame:
    """``pages`` (fetched_pages) with ``first`` = when the URL was first fetched
    (crawl.dedup.rules.first_fetched_rule: from dedup/pages ``known`` if it is there already,
    else this fetch), as epoch seconds."""
    # only dedup/pages rows of the segment's URLs: selected by a broadcast of their url_hash
    # values (8 bytes each), so the table is read, not shuffled
    hashes = F.broadcast(pages.select("url_hash").distinct())
    firsts = to_epoch(known.select("url_hash", "url", F.col("first_fetched_at").alias("_first"))
                      .join(hashes, "url_hash", "left_semi"), ["_first"])
    return (pages.join(firsts, ["url_hash", "url"], "left")
            .withColumn("first", first_fetched_rule(F.col("fetched_at"), F.col("_first"), COLUMN_OPS))
            .drop("_first", "fetched_at"))


def _bands_of(rows: Iterator[Any]) -> Iterator[tuple]:
    for row in rows:
        for band, value in band_rows(row["simhash"], row["signature"]):
            yield row["url_hash"], row["url"], band, value, row["simhash"]


def page_bands(spark: SparkSession, pages: DataFrame) -> DataFrame:
    return spark.createDataFrame(pages.select("url_hash", "url", "simhash", "signature").rdd.mapPartitions(_bands_of),
                                 _BAND_ROW, verifySchema=False)


@dataclass
class Candidates:
    """What the band join gives (see candidate_pairs)."""
    simhash_near: DataFrame   # (url_hash, url, o_url_hash, o_url, o_old): share a SimHash band, within max_hamming
    signature: DataFrame      # (url_hash, url, o_url_hash, o_url, o_old): share a MinHash band, to be confirmed
    collisions: int           # band collisions of the segment's pages: a pair counts once per band it shares
    hot_values: int           # (band, value) pairs left out: held by more than max_candidates pages


# Up to this many rows, a key set that selects rows of the big tables is broadcast (the big
# table is then read, not shuffled); above it, a shuffle join does the work.
_BROADCAST_KEYS = 2_000_000


# A segment of at most this many pages is deduplicated against a cached slice of the tables
# (table_slices); above it, against the tables themselves.
_SLICE_MAX_PAGES = 10_000
# The slice of dedup/pages is selected by a broadcast of the band slice's page keys when it has
# at most this many rows (url_hash and URL: ~100 bytes each).
_SLICE_MAX_KEYS = 200_000


def _known_rows(known: DataFrame, keys: DataFrame, texts: DataFrame) -> DataFrame:
    """dedup/pages rows whose (url_hash, url) is in ``keys`` or whose text_hash is in ``texts``
    (both small: broadcast), in one read of the table."""
    keys = F.broadcast(keys.select("url_hash", "url").withColumn("_key", F.lit(True)))
    texts = F.broadcast(texts.select("text_hash").withColumn("_text", F.lit(True)))
    return (known.join(keys, ["url_hash", "url"], "left").join(texts, "text_hash", "left")
            .filter(F.col("_key").isNotNull() | F.col("_text").isNotNull()).drop("_key", "_text"))


def table_slices(pages: DataFrame, new_bands: DataFrame, known: DataFrame, old_bands: DataFrame,
                 cached: list[DataFrame]) -> tuple[DataFrame, DataFrame]:
    """(known, old_bands) cut down to the rows a dedup of ``pages`` can read, cached (added to
    ``cached``). duplicates() plans a dozen scans of the two tables, each planned anew (a Spark
    job per Delta scan) and read whole; on the slices each is a read of a few cached rows (a
    tenth off dedup's time on a small segment, on the demo root and on a 1 M-URL one:
    docs/decisions.md "Cycle cost, third round").
    The answer is the same: only band rows holding a value of the segment's bands take part in
    the band join and its counts, and only dedup/pages rows of the segment's pages, of pages
    sharing a text with them, or of pages in the band slice are ever joined. If the band slice
    has more than _SLICE_MAX_KEYS rows (hot band values), dedup/pages is left whole."""
    values = F.broadcast(new_bands.select("band", "value").distinct())
    bands = old_bands.join(values, ["band", "value"], "left_semi").cache()
    cached.append(bands)
    if bands.count() > _SLICE_MAX_KEYS:
        return known, bands
    keys = pages.select("url_hash", "url").unionByName(bands.select("url_hash", "url")).distinct()
    rows = _known_rows(known, keys, pages.select("text_hash").distinct()).cache()
    cached.append(rows)
    return rows, bands


@dataclass
class InMemory:
    """What decide_in_memory gives: the segment's pages and band rows (local DataFrames, for the
    MERGEs) and the decision."""
    pages: DataFrame
    new_bands: DataFrame
    n_pages: int
    decision: Decision
    all_new: bool  # none of the segment's pages is in dedup/pages


_SLICE_COLUMNS = ("band", "value", "url_hash", "url", "simhash")


_KNOWN_COLUMNS = [c for c in _PAGE_COLUMNS if c != "first"]


def _known_columns(known: DataFrame) -> DataFrame:
    """dedup/pages rows as decide reads them (``first``: first_fetched_at, epoch seconds)."""
    return to_epoch(known.select(*_KNOWN_COLUMNS, F.col("first_fetched_at").alias("first")), ["first"])


def _whole_tables(spark: SparkSession, cfg: Config, root: CrawlRoot | None, known: DataFrame,
                  old_bands: DataFrame) -> tuple[pa.Table, pa.Table]:
    """dedup/pages as decide reads it (_known_columns) and dedup/bands' _SLICE_COLUMNS, each read
    whole, side by side: ``root``'s tables by reads.whole_arrow (DuckDB where it may), or, without
    ``root``, the frames ``known`` and ``old_bands`` by Spark."""
    if root is None:
        return run_concurrently(lambda: _known_columns(known).toArrow(),
                                lambda: old_bands.select(*_SLICE_COLUMNS).toArrow())
    pages, bands = run_concurrently(
        lambda: whole_arrow(spark, cfg, root, root.dedup_pages, [*_KNOWN_COLUMNS, "first_fetched_at"],
                            ["first_fetched_at"]),
        lambda: whole_arrow(spark, cfg, root, root.dedup_bands, _SLICE_COLUMNS))
    return pages.rename_columns([*_KNOWN_COLUMNS, "first"]), bands


def _filtered_slices(spark: SparkSession, known: DataFrame, old_bands: DataFrame, segment_keys: set[tuple],
                     values: set[tuple[int, int]], texts: set[int]) -> tuple[list[dict], list[tuple]] | None:
    """(dedup/pages rows, band rows) decide reads, as table_slices selects them, in two filtered
    reads one after the other (the second needs the keys the first finds); None if the band
    slice has more than _SLICE_MAX_KEYS rows."""
    band_slice = (old_bands.join(F.broadcast(spark.createDataFrame(sorted(values), "band int, value long")),
                                 ["band", "value"], "left_semi")
                  .select(*_SLICE_COLUMNS).limit(_SLICE_MAX_KEYS + 1).collect())
    if len(band_slice) > _SLICE_MAX_KEYS:
        return None
    keys = spark.createDataFrame(sorted(segment_keys | {(b["url_hash"], b["url"]) for b in band_slice}),
                                 "url_hash long, url string")
    known_rows = _known_columns(_known_rows(known, keys, spark.createDataFrame(sorted((t,) for t in texts),
                                                                                "text_hash long"))).collect()
    return [r.asDict() for r in known_rows], [tuple(b) for b in band_slice]


def _whole_slices(tables: tuple[pa.Table, pa.Table], segment_keys: set[tuple],
                  values: set[tuple[int, int]], texts: set[int]) -> tuple[list[dict], list[tuple]] | None:
    """The same rows as _filtered_slices, from both tables read whole (``tables``: _whole_tables)
    and kept to those rows on the driver (tables that fit it: crawldb.local_read_max_mb)."""
    pages, bands = tables
    value_set = pa.array(sorted({v for _, v in values}), pa.int64())
    band_slice = [tuple(r[c] for c in _SLICE_COLUMNS)
                  for r in arrow_rows(bands, pc.is_in(bands["value"], value_set=value_set))
                  if (r["band"], r["value"]) in values]
    if len(band_slice) > _SLICE_MAX_KEYS:
        return None
    keys = segment_keys | {(b[2], b[3]) for b in band_slice}
    mask = pc.or_kleene(pc.is_in(pages["url_hash"], value_set=pa.array(sorted({h for h, _ in keys}), pa.int64())),
                        pc.is_in(pages["text_hash"], value_set=pa.array(sorted(texts), pa.int64())))
    known_rows = [r for r in arrow_rows(pages, mask) if (r["url_hash"], r["url"]) in keys or r["text_hash"] in texts]
    return known_rows, band_slice


def decide_in_memory(spark: SparkSession, cfg: Config, fetched: DataFrame, known: DataFrame,
                     old_bands: DataFrame, root: CrawlRoot | None = None, whole: bool | None = None
                     ) -> InMemory | None:
    """The duplicates of a segment of at most dedup.local_max_pages pages, decided on the driver
    (crawl/dedup/in_memory.py) from what it collects: the segment's pages, the band rows holding
    one of their band values (at most _SLICE_MAX_KEYS) and the dedup/pages rows those can meet
    (as table_slices selects them): read whole when both tables of ``root`` fit the driver
    (_whole_slices; by DuckDB where it may, reads.whole_arrow), else filtered (_filtered_slices,
    also without ``root``); ``whole`` decides instead when given. Three reads instead of a dozen
    planned queries. None when the segment or its band slice is larger (or a page appears twice):
    duplicates() decides then."""
    limit = cfg.dedup.local_max_pages
    if limit <= 0:
        return None
    rows = fetched.limit(limit + 1).collect()  # fetched_pages: the segment's own files, no table read
    page_rows = [r.asDict() for r in rows]
    segment_keys = {(p["url_hash"], p["url"]) for p in page_rows}
    if len(rows) > limit or len(segment_keys) != len(rows):
        return None
    new_bands = list(_bands_of(page_rows))
    if whole is None:
        whole = root is not None and all(run_concurrently(
            *(lambda path=path: fits_driver(spark, cfg, path) for path in (root.dedup_pages, root.dedup_bands))))
    values, texts = {(b[2], b[3]) for b in new_bands}, {p["text_hash"] for p in page_rows}
    sliced = (_whole_slices(_whole_tables(spark, cfg, root, known, old_bands), segment_keys, values, texts) if whole
              else _filtered_slices(spark, known, old_bands, segment_keys, values, texts))
    if sliced is None:
        return None
    known_rows, band_slice = sliced
    # the segment's pages' own rows are among the known rows: ``first`` comes from them (segment_pages)
    firsts = {(r["url_hash"], r["url"]): r["first"] for r in known_rows}
    for p in page_rows:
        p["first"] = first_fetched_rule(p.pop("fetched_at"), firsts.get((p["url_hash"], p["url"])))
    decision = decide(page_rows, known_rows, new_bands, band_slice,
                      cfg.dedup.max_hamming, cfg.dedup.min_jaccard,
                      cfg.dedup.max_band_candidates)
    known_keys = {(r["url_hash"], r["url"]) for r in known_rows}
    schema = StructType([*[f for f in fetched.schema.fields if f.name != "fetched_at"], StructField("first", DoubleType())])
    return InMemory(spark.createDataFrame([tuple(p[c] for c in _PAGE_COLUMNS) for p in page_rows], schema,
                                          verifySchema=False),
                    spark.createDataFrame(new_bands, _BAND_ROW, verifySchema=False), len(rows), decision,
                    not (segment_keys & known_keys))


def _small(df: DataFrame, cached: list[DataFrame], bound: int | None = None) -> DataFrame:
    """``df`` cached (added to ``cached``, for the caller to unpersist) and, if it has at most
    _BROADCAST_KEYS rows, marked for broadcast. ``bound``: what the caller knows of its size
    (at most that many rows); within the limit it is broadcast without a count (a Spark job)."""
    df = df.cache()
    cached.append(df)
    small = bound is not None and bound <= _BROADCAST_KEYS
    return F.broadcast(df) if small or df.count() <= _BROADCAST_KEYS else df


def candidate_pairs(new_bands: DataFrame, old_bands: DataFrame, max_candidates: int, max_hamming: int,
                    cached: list[DataFrame], n_bands: int | None = None) -> Candidates:
    """The segment's pages against each other and against the canonical pages of earlier
    segments, by an equi-join on (band, value); a band value held by more than
    ``max_candidates`` pages is left out. DataFrames it caches are appended to ``cached``;
    ``new_bands`` is read several times, so the caller caches it (it is computed in Python);
    ``n_bands``, its row count if the caller knows it (the value sets taken from it are no larger).

    One aggregation over the band values of the segment and the table comes first (it runs
    here, as a Spark job): how many rows hold each value the segment has. From it come the hot
    values, the collision count (sum over values of new rows x (rows - 1)) and the MinHash band
    values that the segment shares with any other row — few, since chance almost never makes two
    64-bit band hashes equal — which, broadcast, let the MinHash join read the table instead of
    shuffling it.

    A pair sharing a SimHash band is decided in the join itself: both rows carry the SimHash, so
    the Hamming test is a column expression and the pair never reaches Python. This matters at
    scale: a 16-bit band value is shared by chance by 1 in 65,536 pages, so against 5 M pages
    every new page meets some 300 random SimHash candidates, nearly all 20-40 bits away. A pair
    sharing a MinHash band is returned for the signature comparison.

    Pairs carry ``o_old``: the other page's row came from ``old_bands``. Such a row is stale if
    that page is in the segment too (fetched again); the caller drops those pairs, which are
    few, instead of anti-joining the whole bands table with the segment first."""
    old = old_bands.select("band", "value", F.col("url_hash").alias("o_url_hash"), F.col("url").alias("o_url"),
                           F.col("simhash").alias("o_simhash"), F.lit(True).alias("o_old"))
    counts = (new_bands.select("band", "value", F.lit(1).alias("_new"))
              .unionByName(old.select("band", "value", F.lit(0).alias("_new")))
              .groupBy("band", "value").agg(F.count("*").alias("n"), F.sum("_new").alias("n_new"))
              .filter(F.col("n_new") > 0)).cache()
    cached.append(counts)
    cool_values = is_cool_band(F.col("n"), max_candidates)
    figures = counts.agg(F.sum(F.when(cool_values, band_collisions(F.col("n_new"), F.col("n")))).alias("collisions"),
                         F.count(F.when(~cool_values, 1)).alias("hot")).first()
    hot = _small(counts.filter(~cool_values).select("band", "value"), cached, n_bands)
    cool = new_bands.join(hot, ["band", "value"], "left_anti")
    others = cool.select("band", "value", F.col("url_hash").alias("o_url_hash"), F.col("url").alias("o_url"),
                         F.col("simhash").alias("o_simhash"), F.lit(False).alias("o_old")).unionByName(old)

    is_simhash = F.col("band") < SIMHASH_BANDS
    pair = ("url_hash", "url", "o_url_hash", "o_url", "o_old")
    simhash_near = (cool.filter(is_simhash).join(others.filter(is_simhash), ["band", "value"])
                    .filter((F.col("url_hash") != F.col("o_url_hash"))
                            & (hamming(F.col("simhash"), F.col("o_simhash"), COLUMN_OPS) <= max_hamming))
                    .select(*pair).distinct())
    shared = _small(counts.filter(~is_simhash & cool_values & (F.col("n") > 1)).select("band", "value"), cached,
                    n_bands)
    signature = (cool.join(shared, ["band", "value"], "left_semi")
                 .join(others.filter(~is_simhash).join(shared, ["band", "value"], "left_semi"), ["band", "value"])
                 .filter(F.col("url_hash") != F.col("o_url_hash"))
                 .select(*pair).distinct())
    return Candidates(simhash_near, signature, int(figures["collisions"] or 0), int(figures["hot"]))


def _near_pairs(rows: Iterator[Any], max_hamming: int, min_jaccard: float) -> Iterator[tuple]:
    for r in rows:
        if is_near_duplicate(r["simhash"], r["signature"], r["o_simhash"], r["o_signature"], max_hamming, min_jaccard):
            yield r["url_hash"], r["url"], r["o_url_hash"], r["o_url"]


def _without_stale(pairs: DataFrame, page_keys: DataFrame) -> DataFrame:
    """Pairs minus those whose other side is an old row of a page the segment fetched again."""
    seg = page_keys.select(F.col("url_hash").alias("o_url_hash"), F.col("url").alias("o_url"),
                           F.lit(True).alias("_in_segment"))
    return (pairs.join(seg, ["o_url_hash", "o_url"], "left")
            .filter(~F.col("o_old") | F.col("_in_segment").isNull())
            .select("url_hash", "url", "o_url_hash", "o_url"))


def duplicates(spark: SparkSession, pages: DataFrame, known: DataFrame, old_bands: DataFrame,
               cfg: Config, new_bands: DataFrame | None = None, n_pages: int | None = None
               ) -> tuple[DataFrame, Candidates, list[DataFrame]]:
    """(duplicates: url, url_hash, host_bucket, dup_of, match; the band join's Candidates; cached
    DataFrames to unpersist once the duplicates are written). ``new_bands``: page_bands(pages),
    cached, if the caller has it (run() keeps it for the MERGE); else it is made here.
    ``n_pages``: pages.count() if the caller has it (key sets of the segment are broadcast
    without counting them when it bounds them within _BROADCAST_KEYS).

    The cost grows with the segment, not with dedup/pages and dedup/bands: those are read once
    or twice, and only rows that share a text hash or a band value with a segment page cross a
    shuffle (the exact match selects earlier pages by a broadcast of the segment's text hashes;
    the fingerprints, first-fetch times and scores of the other pages of candidate pairs come by
    a broadcast of their keys when there are at most _BROADCAST_KEYS)."""
    cached: list[DataFrame] = []
    page_keys = pages.select("url_hash", "url")
    known_pages = to_epoch(known.select(*[c for c in _PAGE_COLUMNS if c != "first"],
                                        F.col("first_fetched_at").alias("first")), ["first"])
    def key(p: str) -> Column:
        """crawl.dedup.rules.canonical_key of the ``p``-prefixed page, as a struct (smallest wins)."""
        return F.struct(*canonical_key(F.col(p + "first"), F.col(p + "score"), F.col(p + "url"), COLUMN_OPS))

    # exact: one row per page — the best page with the same text. A group-by, never pairs, so
    # ten thousand copies of one text cost as much as ten thousand distinct pages. Earlier pages
    # take part only if they share a text with the segment (and are not the segment's own pages,
    # whose rows in dedup/pages are from their previous fetch).
    texts = _small(pages.select("text_hash").distinct(), cached, n_pages)
    same_text = known_pages.join(texts, "text_hash", "left_semi").join(page_keys, ["url_hash", "url"], "left_anti")
    best_text = (pages.select(*_PAGE_COLUMNS).unionByName(same_text.select(*_PAGE_COLUMNS))
                 .groupBy("text_hash").agg(F.min(F.struct(key("").alias("k"), "url_hash", "url")).alias("b"))
                 .select("text_hash", F.col("b.url_hash").alias("o_url_hash"), F.col("b.url").alias("o_url")))
    exact = (pages.join(best_text, "text_hash").filter(F.col("url_hash") != F.col("o_url_hash"))
             .select("url_hash", "url", "o_url_hash", "o_url", F.lit(EXACT).alias("match")))

    max_hamming, min_jaccard = cfg.dedup.max_hamming, cfg.dedup.min_jaccard
    if new_bands is None:
        new_bands = page_bands(spark, pages).cache()
        cached.append(new_bands)
    cand = candidate_pairs(new_bands, old_bands, cfg.dedup.max_band_candidates, max_hamming, cached,
                           None if n_pages is None else n_pages * BANDS_PER_PAGE)
    signature_pairs = _without_stale(cand.signature, page_keys).cache()
    cached.append(signature_pairs)

    def other_pages(pairs: DataFrame, columns: tuple[str, ...]) -> DataFrame:
        """o_-prefixed ``columns`` of every other page of ``pairs``: the segment's own row, else
        its row in dedup/pages."""
        keys = _small(pairs.select(F.col("o_url_hash").alias("url_hash"), F.col("o_url").alias("url")).distinct(),
                      cached)
        cols = ("url_hash", "url", *columns)
        earlier = (known_pages.select(*cols).join(keys, ["url_hash", "url"], "left_semi")
                   .join(page_keys, ["url_hash", "url"], "left_anti"))
        return pages.select(*cols).unionByName(earlier).select(*[F.col(c).alias("o_" + c) for c in cols])

    with_prints = (signature_pairs.join(pages.select("url_hash", "url", "simhash", "signature"), ["url_hash", "url"])
                   .join(other_pages(signature_pairs, ("simhash", "signature")), ["o_url_hash", "o_url"]))
    confirmed = spark.createDataFrame(
        with_prints.rdd.mapPartitions(lambda it: _near_pairs(it, max_hamming, min_jaccard)),
        "url_hash long, url string, o_url_hash long, o_url string", verifySchema=False)
    near = _without_stale(cand.simhash_near, page_keys).unionByName(confirmed).withColumn("match", F.lit(NEAR))

    # exact matches first: a pair found both ways counts as exact
    matches = (exact.unionByName(near)
               .groupBy("url_hash", "url", "o_url_hash", "o_url").agg(F.min("match").alias("match"))).cache()
    cached.append(matches)
    ranked = (matches.join(pages.select("url_hash", "url", "host_bucket", "first", "score"), ["url_hash", "url"])
              .join(other_pages(matches, ("first", "score")), ["o_url_hash", "o_url"])
              .withColumn("_self", key("")).withColumn("_other", key("o_")))
    best = (ranked.groupBy("url_hash", "url", "host_bucket", "_self")
            .agg(F.min(F.struct("_other", "o_url", "match")).alias("_best")))
    dups = (best.filter(F.col("_best._other") < F.col("_self"))
            .select("url", "url_hash", "host_bucket", F.col("_best.o_url").alias("dup_of"),
                    F.col("_best.match").alias("match")))
    return _resolve_chains(dups, cached), cand, cached


# Rounds of pointer jumping in _resolve_chains: each halves the longest chain, so 2^32 pages.
_MAX_CHAIN_ROUNDS = 32


def _resolve_chains(dups: DataFrame, cached: list[DataFrame]) -> DataFrame:
    """``dups`` with each ``dup_of`` followed to the end of its chain. Near duplication is not
    transitive: X may match Y and Y match Z while X does not match Z, and then X's best match Y
    is itself a duplicate (of Z). X's dup_of becomes Z, the canonical page of the cluster, so
    dup_of never names a duplicate. A chain only runs to earlier-ranked pages, so it ends.
    Pointer jumping on the cached duplicates (one row per duplicate): with no chain, the usual
    case, this costs one small job."""
    dups = dups.cache()
    cached.append(dups)
    for _ in range(_MAX_CHAIN_ROUNDS):
        step = dups.join(dups.select(F.col("url").alias("_via"), F.col("dup_of").alias("_next")),
                         F.col("dup_of") == F.col("_via"), "left")
        if step.filter(F.col("_next").isNotNull()).limit(1).count() == 0:
            break
        dups = step.select("url", "url_hash", "host_bucket", F.coalesce("_next", "dup_of").alias("dup_of"),
                           "match").cache()
        cached.append(dups)
    return dups


def merge_dedup_tables(spark: SparkSession, cfg: Config, root: CrawlRoot, pages: DataFrame,
                       dups: DataFrame, segment_id: str, new_bands: DataFrame | None = None,
                       all_new: bool = False, local: bool = False) -> None:
    """Canonical pages of the segment into dedup/pages and dedup/bands (their old band rows
    replaced); pages found to be duplicates out of both. ``new_bands``: page_bands(pages) if
    the caller has it already. ``all_new``: the caller read dedup/pages and none of the
    segment's pages is in it (a first fetch of each: the usual case while a crawl grows), so
    there is nothing to replace or delete, and the rows are appended, once per segment (Delta's
    idempotent write, as update's warc_index append), instead of MERGEd: an append does not join
    the table (0.3 s against ~1 s for a MERGE on tiny input: docs/decisions.md "Cycle cost, second
    round"). ``local``: ``pages``, ``dups`` and ``new_bands`` are rows the driver holds (local
    relations, decide_in_memory's), so the MERGEs need not copy their sources first
    (jobs.engine.writes.local_merge_sources)."""
    flagged = pages.join(dups.select("url_hash", "url", F.lit(True).alias("_dup")), ["url_hash", "url"], "left") \
                   .withColumn("_dup", F.coalesce("_dup", F.lit(False)))
    source = flagged.select("url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score",
                            from_epoch_col(F.col("first")).alias("first_fetched_at"),
                            F.lit(segment_id).alias("segment_id"), "_dup")

    def merge_pages() -> None:
        (DeltaTable.forPath(spark, root.dedup_pages).alias("t")
         .merge(source.alias("s"), "t.url_hash = s.url_hash AND t.url = s.url")
         .whenMatchedDelete(condition="s._dup")
         .whenMatchedUpdateAll(condition="NOT s._dup")
         .whenNotMatchedInsertAll(condition="NOT s._dup")
         .execute())

    canonical = flagged.filter(~F.col("_dup"))
    kept_bands = (page_bands(spark, canonical) if new_bands is None
                  else new_bands.join(canonical.select("url_hash", "url"), ["url_hash", "url"], "left_semi"))
    band_source = (kept_bands.withColumn("_dup", F.lit(False))
                   .unionByName(flagged.filter("_dup").select("url_hash", "url", "simhash")
                                .withColumn("band", F.explode(F.sequence(F.lit(0), F.lit(BANDS_PER_PAGE - 1))))
                                .withColumn("value", F.lit(0).cast("long")).withColumn("_dup", F.lit(True))))

    def merge_bands() -> None:
        (DeltaTable.forPath(spark, root.dedup_bands).alias("t")
         .merge(band_source.alias("s"), "t.band = s.band AND t.url_hash = s.url_hash AND t.url = s.url")
         .whenMatchedDelete(condition="s._dup")
         .whenMatchedUpdate(condition="NOT s._dup", set={"value": "s.value", "simhash": "s.simhash"})
         .whenNotMatchedInsert(condition="NOT s._dup", values={c: f"s.{c}" for c in ("band", "value", "url_hash",
                                                                                      "url", "simhash")})
         .execute())

    if all_new:
        app_id = txn_app_id("dedup", segment_id)
        page_rows = source.filter(~F.col("_dup")).select(*DEDUP_PAGES_SCHEMA.fieldNames())
        run_concurrently(lambda: append_once(page_rows, root.dedup_pages, app_id),
                         lambda: append_once(kept_bands.select(*DEDUP_BANDS_SCHEMA.fieldNames()), root.dedup_bands,
                                             app_id))
        return
    with merge_mode(spark, cfg, root.dedup_pages, root.dedup_bands), local_merge_sources(spark, local):
        run_concurrently(merge_pages, merge_bands)  # two tables, neither reads the other


@writes_commits("dedup")
def run(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str) -> DedupResult:
    if not path_exists(spark, root.segment(segment_id)):
        raise UserError(f"no segment {segment_id} in {root.root}")
    if not path_exists(spark, root.fetched(segment_id) + "/_SUCCESS"):
        raise UserError(f"segment {segment_id} has not been fetched: run 'deltacrawl fetch {segment_id}' first")
    if path_exists(spark, root.updated_marker(segment_id)):
        raise UserError(f"segment {segment_id} is already updated: dedup runs between fetch and update")
    ensure_dedup_tables(spark, root)
    # until both commits are in, update refuses the segment (see the docstring, "Re-run")
    delete_path(spark, root.deduped_marker(segment_id))
    write_marker(spark, root.dedup_started_marker(segment_id), "dedup started\n")
    result = _deduplicate(spark, cfg, root, segment_id)
    write_marker(spark, root.deduped_marker(segment_id), f"{result.summary()}\n")
    return result


def _deduplicate(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str) -> DedupResult:
    known, old_bands = read_delta(spark, root.dedup_pages, pinned=True), read_delta(spark, root.dedup_bands, pinned=True)
    small = decide_in_memory(spark, cfg, fetched_pages(spark, root, segment_id), known, old_bands, root)
    if small is not None:
        # the decision's rows as they are written, and as the MERGEs' source: with the pages and
        # band rows, all rows the driver holds
        dups = spark.createDataFrame(small.decision.duplicates, _RESULT_SCHEMA)
        dups.write.mode("overwrite").parquet(root.dedup_result(segment_id))
        matches = [d[4] for d in small.decision.duplicates]
        result = DedupResult(segment_id, small.n_pages, matches.count(EXACT), matches.count(NEAR),
                             small.decision.collisions, small.decision.hot_values)
        merge_dedup_tables(spark, cfg, root, small.pages, dups, segment_id, small.new_bands, small.all_new, local=True)
        return result
    pages = segment_pages(spark, root, segment_id, known).cache()
    new_bands = page_bands(spark, pages).cache()  # Python: computed once for the join and the MERGE
    slices: list[DataFrame] = []
    try:
        n_pages, (dups, cand, cached) = decide_by_spark(spark, cfg, pages, new_bands, known, old_bands, slices)
        try:
            dups.write.mode("overwrite").parquet(root.dedup_result(segment_id))
        finally:
            for df in cached:
                df.unpersist()
        written = spark.read.parquet(root.dedup_result(segment_id))
        counts = {r["match"]: r["n"] for r in written.groupBy("match").agg(F.count("*").alias("n")).collect()}
        result = DedupResult(segment_id, n_pages, counts.get(EXACT, 0), counts.get(NEAR, 0),
                             cand.collisions, cand.hot_values)
        merge_dedup_tables(spark, cfg, root, pages, written, segment_id, new_bands)
    finally:
        for df in (*slices, new_bands, pages):
            df.unpersist()
    return result


def decide_by_spark(spark: SparkSession, cfg: Config, pages: DataFrame, new_bands: DataFrame,
                    known: DataFrame, old_bands: DataFrame, slices: list[DataFrame]
                    ) -> tuple[int, tuple[DataFrame, Candidates, list[DataFrame]]]:
    """(the number of pages, duplicates()'s answer) for the segment's ``pages`` (segment_pages,
    cached) and their ``new_bands`` (page_bands, cached): against cached slices of the tables
    (table_slices, added to ``slices``) for a segment of up to _SLICE_MAX_PAGES pages, else
    against the tables."""
    n_pages = pages.count()
    if n_pages <= _SLICE_MAX_PAGES:
        known, old_bands = table_slices(pages, new_bands, known, old_bands, slices)
    return n_pages, duplicates(spark, pages, known, old_bands, cfg, new_bands, n_pages)


def main(argv: list[str] | None = None) -> int:
    return run_segment_step("deltacrawl dedup", argv,
                            "Find exact and near duplicates among a fetched segment's pages (before update).", run)


if __name__ == "__main__":
    sys.exit(main())
