"""What a segment discovered, as crawldb rows: update's DataFrame -> DataFrame pieces (not a step of its own).

Sources, all already normalised and filtered in the fetch task (crawl/crawldb/discovery.py):
  * outlinks of fetched pages (and the canonical hint of a page), depth + 1, each with an
    OPIC-like share of the page's score (crawl.crawldb.status.outlink_score);
  * redirect targets, carrying the chain length (redirect_hops);
  * sitemap entries (the host rows' ``sitemap_entries``): depth 1 and the score a seed's only
    outlink would get (a sitemap is the site's own list of the pages it cares about).

They are deduplicated per segment (least depth, summed score, in-link count, newest lastmod),
the URLs fetched in this segment are dropped, and the rest are joined with the crawldb:
  * unknown URLs become new unfetched rows — at most as many per host as its total budget
    (``discovery.max_urls_per_host_total`` or a host override's ``max_urls_total``, minus the
    host_state.url_count already discovered) allows, best score first; the rest are counted;
  * known URLs whose sitemap <lastmod> is newer than our last fetch become *hints*: update
    makes them due now.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.crawldb.in_memory import (CANDIDATE_AGGREGATES, LINK_SOURCES, NEW_URL_ORDER, lastmod_hint_rule,
                                      within_budget_rule)
from crawl.crawldb.status import discovered_links, new_url_state, outlink_score
from crawl.fetch.politeness import override_value
from crawl.net.urls import host_bucket, host_of, url_hash
from jobs.engine.column_ops import COLUMN_OPS, spark_order
from jobs.engine.host_caps import override_cap
from jobs.engine.schemas import URL_STATE_SCHEMA, URL_STATE_TIMES, epoch_schema, from_epoch, from_epoch_col

HOST_TOTAL_CAP = "host_total_cap"   # link_rejects reason: the host holds all the URLs it may
_URL_FIELDS = URL_STATE_SCHEMA.fieldNames()
_CANDIDATE_SCHEMA = ("url string, host string, host_bucket int, url_hash long, depth int, score double, "
                     "redirect_hops int, inlinks int, lastmod double")


def _link_rows(rows: Iterator[Any], factor: float, max_depth: int, max_redirects: int) -> Iterator[tuple]:
    for row in rows:
        for url, depth, share, hops in discovered_links(row.asDict(), factor, max_depth, max_redirects):
            yield url, depth, share, hops, 1, None


def _keyed(rows: Iterator[Any], buckets: int) -> Iterator[tuple]:
    for row in rows:
        url = row["url"]
        host = host_of(url)
        yield (url, host, host_bucket(host, buckets), url_hash(url), int(row["depth"]), float(row["score"]),
               int(row["redirect_hops"]), int(row["inlinks"]), row["lastmod"])


@dataclass(frozen=True)
class LinkSettings:
    factor: float         # update.outlink_score_factor
    max_depth: int        # update.max_depth
    max_redirects: int    # fetch.max_redirects
    sitemap_score: float  # a sitemap entry's score: a seed's only outlink's
    buckets: int          # crawldb.host_buckets

    @classmethod
    def of(cls, cfg: Config) -> "LinkSettings":
        factor = cfg.update.outlink_score_factor
        return cls(factor, cfg.update.max_depth, cfg.fetch.max_redirects,
                   outlink_score(cfg.inject.seed_score, 1, factor), cfg.crawldb.host_buckets)


def candidates(spark: SparkSession, outcomes: DataFrame, hosts: DataFrame, cfg: Config) -> DataFrame:
    """One row per URL discovered in the segment and not fetched in it (``_CANDIDATE_SCHEMA``)."""
    settings = LinkSettings.of(cfg)
    factor, max_depth, max_redirects = settings.factor, settings.max_depth, settings.max_redirects
    buckets = settings.buckets
    # outlinks_total: null in a segment fetched before it existed (discovered_links falls back)
    total = F.col("outlinks_total") if "outlinks_total" in outcomes.columns else F.lit(None).cast("int")
    sources = (outcomes.filter(F.col("fetch_status").isin(*LINK_SOURCES))
               .select("outlinks", total.alias("outlinks_total"), "depth", "score", "fetch_status", "redirect_hops"))
    links = spark.createDataFrame(
        sources.rdd.mapPartitions(lambda it: _link_rows(it, factor, max_depth, max_redirects)),
        "url string, depth int, score double, redirect_hops int, inlinks int, lastmod double", verifySchema=False)
    sitemap_score = settings.sitemap_score
    from_sitemaps = (hosts.filter(F.col("sitemap_entries").isNotNull())
                     .select(F.explode("sitemap_entries").alias("e"))
                     .select(F.col("e.url").alias("url"), F.lit(1).alias("depth"),
                             F.lit(sitemap_score).alias("score"), F.lit(0).alias("redirect_hops"),
                             F.lit(0).alias("inlinks"), F.col("e.lastmod").alias("lastmod")))
    if max_depth < 1:
        from_sitemaps = from_sitemaps.limit(0)
    # per URL, crawl.crawldb.in_memory.CANDIDATE_AGGREGATES (the driver path folds with the same)
    unique = (links.unionByName(from_sitemaps).groupBy("url")
              .agg(*[getattr(F, how)(name).alias(name) for name, how in CANDIDATE_AGGREGATES])
              .join(outcomes.select("url"), "url", "left_anti"))
    return spark.createDataFrame(unique.rdd.mapPartitions(lambda it: _keyed(it, buckets)), _CANDIDATE_SCHEMA,
                                 verifySchema=False)


def host_total_cap(cfg: Config) -> Column:
    """discovery.max_urls_per_host_total, or the first matching override's max_urls_total."""
    return override_cap(cfg, "max_urls_total", cfg.discovery.max_urls_per_host_total)


def host_total_cap_of(cfg: Config, host: str) -> int:
    """host_total_cap for one host, in Python."""
    return override_value(cfg, "max_urls_total", cfg.discovery.max_urls_per_host_total, host)


def split_known(cands: DataFrame, url_state: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(unknown candidates, known candidates with the crawldb's last_fetched_at)."""
    keys = url_state.select("host_bucket", "url_hash", "url", F.col("last_fetched_at").alias("_last_fetched_at"),
                            F.lit(True).alias("_known"))
    joined = cands.join(keys, ["host_bucket", "url_hash", "url"], "left")
    return (joined.filter(F.col("_known").isNull()).drop("_known", "_last_fetched_at"),
            joined.filter(F.col("_known")).drop("_known"))


def within_host_budget(unknown: DataFrame, host_state: DataFrame, cfg: Config) -> DataFrame:
    """Unknown candidates with ``_keep``: whether the host's total budget has room for them."""
    counts = host_state.select("host_bucket", "host", "url_count")
    best_first = Window.partitionBy("host").orderBy(*spark_order(NEW_URL_ORDER))
    keep = within_budget_rule(F.row_number().over(best_first), host_total_cap(cfg), F.col("url_count"), COLUMN_OPS)
    return (unknown.join(counts, ["host_bucket", "host"], "left")
            .withColumn("_keep", keep)
            .drop("url_count"))


def _new_rows(rows: Iterator[Any], now: float, segment_id: str | None) -> Iterator[tuple]:
    for row in rows:
        state = new_url_state(row["url"], row["host"], row["host_bucket"], row["url_hash"], row["depth"],
                              row["score"], now, row["redirect_hops"], row["inlinks"], segment_id)
        yield tuple(state[name] for name in _URL_FIELDS)


def new_url_rows(spark: SparkSession, kept: DataFrame, now: float, segment_id: str) -> DataFrame:
    """crawldb rows (unfetched, due now) for the kept unknown candidates, discovered in ``segment_id``."""
    rdd = kept.rdd.mapPartitions(lambda it: _new_rows(it, now, segment_id))
    # rows come from crawl.crawldb.status.new_url_state in schema order: no per-row type verification
    return from_epoch(spark.createDataFrame(rdd, epoch_schema(URL_STATE_SCHEMA), verifySchema=False), URL_STATE_TIMES)


def per_host_counts(budgeted: DataFrame) -> DataFrame:
    """(host_bucket, host, new_urls, over_cap) per host: what the budget let in and kept out."""
    return (budgeted.groupBy("host_bucket", "host")
            .agg(F.sum(F.col("_keep").cast("long")).alias("new_urls"),
                 F.sum((~F.col("_keep")).cast("long")).alias("over_cap")))


def lastmod_hints(known: DataFrame, now: float) -> DataFrame:
    """Known URLs whose sitemap lastmod is newer than our last fetch: (keys, next_fetch_at = now)."""
    newer = lastmod_hint_rule(from_epoch_col(F.col("lastmod")), F.col("_last_fetched_at"), COLUMN_OPS)
    return (known.filter(newer)
            .select("host_bucket", "url_hash", "url", from_epoch_col(F.lit(now)).alias("next_fetch_at")))
