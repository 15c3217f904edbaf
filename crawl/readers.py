"""Reading a crawl root's Delta tables without Spark: DuckDB, polars and delta-rs (``deltalake``).

Install with ``pip install -e '.[analysis]'`` (setup.py). The names are the ones ``deltacrawl sql``
registers (crawldb, hostdb, warc_index, dedup_pages, dedup_bands, cycles), so a query moves
between Spark and DuckDB with little more than dialect changes. Local crawl roots only here;
each library has its own object-storage settings.

What works on deltacrawl's tables, measured (docs/readers.md): the crawldb, hostdb, dedup pages
and dedup bands use deletion vectors (a MERGE marks changed rows instead of copying whole files: 8.5x
fewer bytes written per update, docs/layout.md), and every reader below honours them. The one
exception is delta-rs's own Arrow/pandas export (``DeltaTable.to_pyarrow_table()``,
``to_pyarrow_dataset()``, ``to_pandas()``), which refuses such tables ("reader features
{'deletionVectors'} ... not yet supported" in deltalake 1.6.6): use ``deltalake_query`` (its
DataFusion SQL engine, which applies them) or polars, which reads them through deltalake.

DuckDB's delta extension is normally downloaded from extensions.duckdb.org by ``INSTALL
delta``/autoloading; here it comes from PyPI instead (``duckdb-extension-delta``, the same
signed binary for one DuckDB version: DuckDB verifies its signature on LOAD), so no download
happens at run time.
"""
from __future__ import annotations

import os
from typing import Any

# name -> folder inside the crawl root (jobs/tables.py CrawlRoot)
TABLE_DIRS = {
    "crawldb": "crawldb",
    "hostdb": "hostdb",
    "warc_index": "warc_index",
    "dedup_pages": "dedup/pages",
    "dedup_bands": "dedup/bands",
    "cycles": "cycles",
}


def table_paths(crawl_root: str) -> dict[str, str]:
    """name -> absolute path of each Delta table present in a local crawl root."""
    root = os.path.abspath(crawl_root.removeprefix("file://"))
    found = {name: os.path.join(root, folder) for name, folder in TABLE_DIRS.items()}
    return {name: path for name, path in found.items() if os.path.isdir(os.path.join(path, "_delta_log"))}


def _paths_or_fail(crawl_root: str) -> dict[str, str]:
    paths = table_paths(crawl_root)
    if "crawldb" not in paths:
        raise FileNotFoundError(f"no crawldb in {crawl_root}")
    return paths


def duckdb_delta_extension() -> str:
    """Path of the delta extension for the installed DuckDB, from the duckdb-extension-delta package."""
    import importlib.util

    import duckdb
    spec = importlib.util.find_spec("duckdb_extension_delta")
    if spec is None or spec.origin is None:
        raise ImportError("DuckDB's delta extension is not installed: pip install -e '.[analysis]' "
                          "(duckdb-extension-delta, the version of duckdb)")
    path = os.path.join(os.path.dirname(spec.origin), "extensions", f"v{duckdb.__version__}", "delta.duckdb_extension")
    if not os.path.exists(path):
        raise ImportError(f"duckdb-extension-delta does not match duckdb {duckdb.__version__} "
                          f"(install duckdb-extension-delta=={duckdb.__version__})")
    return path


def duckdb_connect(crawl_root: str, database: str = ":memory:") -> Any:
    """A DuckDB connection with the delta extension loaded and one view per table
    (``SELECT status, count(*) FROM crawldb GROUP BY status``)."""
    import duckdb
    paths = _paths_or_fail(crawl_root)
    con = duckdb.connect(database)
    con.load_extension(duckdb_delta_extension())
    for name, path in paths.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM delta_scan('{_sql_string(path)}')")
    return con


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


def polars_frames(crawl_root: str) -> dict[str, Any]:
    """name -> polars LazyFrame (``pl.scan_delta``) of each table."""
    import polars as pl
    return {name: pl.scan_delta(path) for name, path in _paths_or_fail(crawl_root).items()}


def deltalake_query(crawl_root: str, sql: str) -> Any:
    """Run ``sql`` with delta-rs's query engine (DataFusion, deletion vectors applied) over the
    tables registered by name; returns a pyarrow Table."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    builder = QueryBuilder()
    for name, path in _paths_or_fail(crawl_root).items():
        builder = builder.register(name, DeltaTable(path))
    return pa.table(builder.execute(sql).read_all())
