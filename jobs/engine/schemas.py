"""The schemas of the crawl root's tables, column by column as docs/crawldb.md documents them, and
the epoch boundary: pure code (crawl/) works with epoch seconds, tables hold TIMESTAMP columns for
SQL users, and ``to_epoch``/``from_epoch`` convert where the two meet.
"""
from __future__ import annotations

from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DoubleType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType, TimestampType)


URL_STATE_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("status", StringType(), False),
    StructField("depth", IntegerType(), False),
    StructField("score", DoubleType(), False),
    StructField("discovered_at", TimestampType(), False),
    StructField("last_fetched_at", TimestampType(), True),
    StructField("next_fetch_at", TimestampType(), True),
    StructField("fetch_interval_s", LongType(), True),
    StructField("retries", IntegerType(), False),
    StructField("http_status", IntegerType(), True),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("content_hash", StringType(), True),
    StructField("content_type", StringType(), True),
    StructField("simhash", LongType(), True),
    StructField("change_count", IntegerType(), False),
    StructField("fetch_count", IntegerType(), False),
    StructField("dup_of", StringType(), True),
    StructField("lease_until", TimestampType(), True),
    StructField("segment_id", StringType(), True),
    StructField("warc_file", StringType(), True),
    StructField("warc_offset", LongType(), True),
    StructField("warc_length", LongType(), True),
    StructField("redirect_to", StringType(), True),
    StructField("error", StringType(), True),
    StructField("parse_error", StringType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("inlinks", IntegerType(), True),
    StructField("canonical_url", StringType(), True),
    StructField("noindex", BooleanType(), True),
    StructField("text_hash", LongType(), True),
    StructField("observed_count", IntegerType(), True),
    StructField("first_observed_at", TimestampType(), True),
    StructField("last_observed_at", TimestampType(), True),
    StructField("last_changed_at", TimestampType(), True),
    StructField("gone_checks", IntegerType(), True),
    # last, where _ensure adds it to a crawldb made before it existed (its old rows have null)
    StructField("discovered_segment", StringType(), True),
    # the change history's exposure and what the next fetch buys (crawl.crawldb.schedule:
    # record_exposure, next_interval_and_value); added after discovered_segment, so null in old rows
    StructField("unchanged_s", DoubleType(), True),
    StructField("change_span_s", DoubleType(), True),
    StructField("refresh_value", DoubleType(), True),
    StructField("refresh_slope", DoubleType(), True),
    # how many changes change_span_s holds (record_exposure: the first answer's Last-Modified
    # dates one more); added after refresh_slope, so null in old rows (then change_count)
    StructField("exposure_changes", IntegerType(), True),
    # why the URL's host holds it back (crawl.crawldb.held_back: robots_unreachable, host_backoff,
    # ...), null when it does not; update keeps it in sync. Added after exposure_changes, so null
    # in old rows until update reaches their host
    StructField("held_back", StringType(), True),
])


URL_STATE_TIMES = ("discovered_at", "last_fetched_at", "next_fetch_at", "lease_until", "first_observed_at",
                   "last_observed_at", "last_changed_at")


HOST_STATE_SCHEMA = StructType([
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", TimestampType(), True),
    StructField("robots_error", StringType(), True),
    StructField("crawl_delay_s", DoubleType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("deferred_until", TimestampType(), True),
    StructField("backoff_until", TimestampType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("stop_reason", StringType(), True),
    StructField("mean_response_ms", DoubleType(), True),
    StructField("override_pattern", StringType(), True),
    StructField("min_delay_s", DoubleType(), True),
    StructField("last_fetch_at", TimestampType(), True),
    StructField("requests", LongType(), False),
    StructField("pages_fetched", LongType(), False),
    StructField("errors", LongType(), False),
    StructField("last_segment_id", StringType(), True),
    StructField("url_count", LongType(), True),
    StructField("url_budget", IntegerType(), True),
    StructField("trap_signal", StringType(), True),
    StructField("links_found", LongType(), True),
    StructField("links_kept", LongType(), True),
    StructField("link_rejects", MapType(StringType(), LongType()), True),
    StructField("sitemaps_fetched_at", TimestampType(), True),
    StructField("sitemap_urls", LongType(), True),
    # sitemap and feed files refused or cut short, over all segments, and the last one's URL and
    # reason (crawl/fetch/sitemap_reader.py); null in rows older than them (then 0 and none)
    StructField("sitemap_errors", LongType(), True),
    StructField("sitemap_last_error", StringType(), True),
    # robots.txt per origin (crawl/fetch/robots.py): the origin the robots_* columns describe, and
    # the other one's answer as JSON; the host name's addresses while they may be reused, the DNS
    # queries sent for it over all segments, and why the last cycle's DNS or TLS attempt failed.
    # Null in rows older than them (robots_scheme null: the robots_* columns are not reused)
    StructField("robots_scheme", StringType(), True),
    StructField("robots_other", StringType(), True),
    StructField("addresses", ArrayType(StringType()), True),
    StructField("addresses_expire_at", TimestampType(), True),
    StructField("dns_queries", LongType(), True),
    StructField("dns_error", StringType(), True),
    StructField("tls_error", StringType(), True),
    # why the host holds its URLs back after its last cycle (crawl.crawldb.held_back), null when it
    # does not: what update compares to tell which hosts' URLs to rewrite; null in older rows
    StructField("held_back", StringType(), True),
])


HOST_STATE_TIMES = ("robots_fetched_at", "deferred_until", "backoff_until", "last_fetch_at", "sitemaps_fetched_at",
                    "addresses_expire_at")


FETCHLIST_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("depth", IntegerType(), False),
    StructField("score", DoubleType(), False),
    StructField("segment_id", StringType(), False),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", TimestampType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("sitemaps_fetched_at", TimestampType(), True),
    StructField("robots_scheme", StringType(), True),
    StructField("robots_other", StringType(), True),
    StructField("addresses", ArrayType(StringType()), True),
    StructField("addresses_expire_at", TimestampType(), True),
])


FETCHLIST_TIMES = ("robots_fetched_at", "sitemaps_fetched_at", "addresses_expire_at")


# One row per attempted URL (kind = "url") or per host (kind = "host"); the fields of the other
# kind are null. Written partitioned by kind. Times here are epoch seconds (doubles) as produced by
# the fetcher; update converts them.
FETCHED_SCHEMA = StructType([
    StructField("kind", StringType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("segment_id", StringType(), False),
    # url rows
    StructField("url", StringType(), True),
    StructField("url_hash", LongType(), True),
    StructField("depth", IntegerType(), True),
    StructField("score", DoubleType(), True),
    StructField("fetch_status", StringType(), True),
    StructField("http_status", IntegerType(), True),
    StructField("fetched_at", DoubleType(), True),
    StructField("elapsed_ms", LongType(), True),
    StructField("content_type", StringType(), True),
    StructField("content_length", LongType(), True),
    StructField("truncated", BooleanType(), True),
    StructField("content_hash", StringType(), True),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("redirect_to", StringType(), True),
    StructField("error", StringType(), True),
    StructField("outlinks", ArrayType(StringType()), True),
    # the page's links within the crawl's rules before the seen-URL filter dropped the known ones:
    # what its score is divided by (crawl.crawldb.status.discovered_links; null in older segments)
    StructField("outlinks_total", IntegerType(), True),
    StructField("parse_error", StringType(), True),
    StructField("warc_file", StringType(), True),
    StructField("warc_offset", LongType(), True),
    StructField("warc_length", LongType(), True),
    StructField("payload_digest", StringType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("canonical", StringType(), True),
    StructField("noindex", BooleanType(), True),
    StructField("text_hash", LongType(), True),
    StructField("simhash", LongType(), True),
    StructField("signature", BinaryType(), True),
    # host rows
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", DoubleType(), True),
    StructField("robots_error", StringType(), True),
    StructField("crawl_delay_s", DoubleType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("deferred", BooleanType(), True),
    StructField("backoff_until", DoubleType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("stop_reason", StringType(), True),
    StructField("mean_response_ms", DoubleType(), True),
    StructField("override_pattern", StringType(), True),
    StructField("min_delay_s", DoubleType(), True),
    StructField("requests", LongType(), True),
    StructField("pages_fetched", LongType(), True),
    StructField("errors", LongType(), True),
    StructField("last_fetch_at", DoubleType(), True),
    StructField("links_found", LongType(), True),
    StructField("links_kept", LongType(), True),
    StructField("link_rejects", MapType(StringType(), LongType()), True),
    StructField("trap_signal", StringType(), True),
    StructField("similar_pages", LongType(), True),
    StructField("sitemaps_fetched_at", DoubleType(), True),
    StructField("sitemap_entries", ArrayType(StructType([StructField("url", StringType(), False),
                                                         StructField("lastmod", DoubleType(), True)])), True),
    # sitemap and feed files this segment refused or cut short, and the last one's URL and reason
    # (null in segments fetched before they existed)
    StructField("sitemap_errors", LongType(), True),
    StructField("sitemap_last_error", StringType(), True),
    # robots.txt per origin, the host name's addresses (epoch seconds) and the segment's DNS
    # queries and DNS/TLS failures (crawl/fetch/fetcher.py host rows; null in older segments)
    StructField("robots_scheme", StringType(), True),
    StructField("robots_other", StringType(), True),
    StructField("addresses", ArrayType(StringType()), True),
    StructField("addresses_expire_at", DoubleType(), True),
    StructField("dns_queries", LongType(), True),
    StructField("dns_error", StringType(), True),
    StructField("tls_error", StringType(), True),
    # both kinds: which task ("<partition>.<attempt>") and executor ("<machine>/<executor id>", or
    # "<machine>/jvm-<pid>" where Spark does not tell the id) fetched the row; one host is always
    # one task of its segment
    StructField("fetch_task", StringType(), True),
    StructField("fetch_executor", StringType(), True),
])


# One row per archived record (response or revisit); see docs/crawldb.md.
WARC_INDEX_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("fetched_at", TimestampType(), False),
    StructField("http_status", IntegerType(), True),
    StructField("mime", StringType(), True),
    StructField("payload_digest", StringType(), True),
    StructField("warc_file", StringType(), False),
    StructField("warc_offset", LongType(), False),
    StructField("warc_length", LongType(), False),
    StructField("segment_id", StringType(), False),
    # last, where _ensure adds it to an index made before it existed (its old rows have null)
    StructField("warc_uri", StringType(), True),
])


# dedup/pages: one row per canonical page with text (its fingerprints, for later segments)
DEDUP_PAGES_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("text_hash", LongType(), False),
    StructField("simhash", LongType(), False),
    StructField("signature", BinaryType(), True),
    StructField("score", DoubleType(), False),
    StructField("first_fetched_at", TimestampType(), False),
    StructField("segment_id", StringType(), False),
])


# dedup/bands: the band rows of every canonical page (crawl/dedup/rules.py), partitioned by band
DEDUP_BANDS_SCHEMA = StructType([
    StructField("band", IntegerType(), False),
    StructField("value", LongType(), False),
    StructField("url_hash", LongType(), False),
    StructField("url", StringType(), False),
    StructField("simhash", LongType(), False),
])


# cycles: one row per step run (jobs/engine/tracking.py, crawl/tracking.py), appended; see docs/crawldb.md
CYCLES_SCHEMA = StructType([
    StructField("crawl_id", StringType(), True),
    StructField("mlflow_run_id", StringType(), True),
    StructField("cycle", IntegerType(), True),
    StructField("step", StringType(), False),
    StructField("segment_id", StringType(), True),
    StructField("started_at", TimestampType(), False),
    StructField("seconds", DoubleType(), False),
    StructField("urls", LongType(), True),
    StructField("hosts", LongType(), True),
    StructField("by_outcome", MapType(StringType(), LongType()), True),
    StructField("bytes", LongType(), True),
    StructField("new_urls", LongType(), True),
    StructField("duplicates", LongType(), True),
    StructField("crawldb_urls", LongType(), True),
    StructField("crawldb_by_status", MapType(StringType(), LongType()), True),
    # fetch: URLs answered per media type; last, where _ensure adds it to a table made before it
    # existed (its older rows have null)
    StructField("by_content_type", MapType(StringType(), LongType()), True),
])


def epoch_schema(schema: StructType) -> StructType:
    """The same schema with TIMESTAMP columns as DOUBLE epoch seconds (for pure Python code)."""
    return StructType([StructField(f.name, DoubleType(), f.nullable) if isinstance(f.dataType, TimestampType)
                       else f for f in schema.fields])


def to_epoch(df: DataFrame, columns: Iterable[str]) -> DataFrame:
    return df.withColumns({c: F.unix_micros(F.col(c)) / F.lit(1e6) for c in columns})


def from_epoch_col(col: Column) -> Column:
    return F.timestamp_micros(F.round(col * F.lit(1e6)).cast("long"))


def from_epoch(df: DataFrame, columns: Iterable[str]) -> DataFrame:
    return df.withColumns({c: from_epoch_col(F.col(c)) for c in columns})
