"""Reading a crawl root's Delta tables without Spark: DuckDB, polars and delta-rs (``deltalake``).

Install with ``pip install -e '.[analysis]'`` (setup.py). The names are the ones ``deltacrawl sql``
registers (crawldb, hostdb, warc_index, dedup_pages, dedup_bands, cycles, and the views segments,
crawldb_history, hostdb_history), so a query moves between Spark and DuckDB with little more than
dialect changes. Local crawl roots only here; each library has its own object-storage settings.

Time travel needs no Spark either: DuckDB's ``delta_scan(path, version => N)``, polars'
``pl.scan_delta(path, version=N)`` and deltalake's ``DeltaTable(path, version=N)`` read a table as
of version N (``table_paths`` gives the paths; the history views give the versions).

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

import glob
import json
import os
from typing import Any

# name -> folder inside the crawl root (jobs/engine/crawl_root.py CrawlRoot)
TABLE_DIRS = {
    "crawldb": "crawldb",
    "hostdb": "hostdb",
    "warc_index": "warc_index",
    "dedup_pages": "dedup/pages",
    "dedup_bands": "dedup/bands",
    "cycles": "cycles",
}


# DESCRIBE HISTORY's columns as Spark's crawldb_history / hostdb_history views have them (jobs/sql.py),
# with userMetadata's fields (jobs/engine/commit_info.py) as columns of their own
HISTORY_VIEWS = {"crawldb_history": "crawldb", "hostdb_history": "hostdb"}
COMMIT_FIELDS = ("step", "segment", "cycle", "crawl_id")


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


def segment_files(crawl_root: str) -> list[str]:
    """The Parquet files of every segment's fetched URL rows (what Spark's ``segments`` view reads)."""
    root = os.path.abspath(crawl_root.removeprefix("file://"))
    return sorted(glob.glob(os.path.join(glob.escape(root), "segments", "*", "fetched", "kind=url", "*.parquet")))


def commit_fields(user_metadata: str | None) -> dict[str, Any]:
    """step, segment, crawl_id and cycle from a commit's userMetadata (None where absent)."""
    try:
        info = json.loads(user_metadata or "null") or {}
    except ValueError:
        info = {}
    info = info if isinstance(info, dict) else {}
    cycle = info.get("cycle")
    return {**{f: (str(info[f]) if info.get(f) is not None else None) for f in ("step", "segment", "crawl_id")},
            "cycle": int(cycle) if isinstance(cycle, int) else None}


def history_table(path: str) -> Any:
    """A Delta table's commit history as a pyarrow Table, newest first: version, timestamp,
    operation, userMetadata, and step / segment / cycle / crawl_id from userMetadata."""
    import pyarrow as pa
    from deltalake import DeltaTable
    rows = [{"version": commit["version"], "timestamp": commit.get("timestamp"), "operation": commit.get("operation"),
             "userMetadata": commit.get("userMetadata"), **commit_fields(commit.get("userMetadata"))}
            for commit in DeltaTable(path).history()]
    schema = pa.schema([("version", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")),
                        ("operation", pa.string()), ("userMetadata", pa.string()), ("step", pa.string()),
                        ("segment", pa.string()), ("crawl_id", pa.string()), ("cycle", pa.int32())])
    return pa.Table.from_pylist(rows, schema=schema)


def duckdb_connect(crawl_root: str, database: str = ":memory:") -> Any:
    """A DuckDB connection with the delta extension loaded and one view per table
    (``SELECT status, count(*) FROM crawldb GROUP BY status``), plus ``segments`` (every segment's
    fetched URL rows) and ``crawldb_history`` / ``hostdb_history`` (the commits, as of connecting)."""
    import duckdb
    paths = _paths_or_fail(crawl_root)
    con = duckdb.connect(database)
    con.load_extension(duckdb_delta_extension())
    for name, path in paths.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM delta_scan('{_sql_string(path)}')")
    files = segment_files(crawl_root)
    if files:
        listed = ", ".join(f"'{_sql_string(f)}'" for f in files)
        con.execute(f"CREATE OR REPLACE VIEW segments AS SELECT * FROM read_parquet([{listed}], union_by_name = true)")
    for view, table in HISTORY_VIEWS.items():
        if table in paths:
            con.register(view, history_table(paths[table]))
    return con


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


def polars_frames(crawl_root: str) -> dict[str, Any]:
    """name -> polars LazyFrame (``pl.scan_delta``) of each table, plus ``segments`` and the
    history views as in ``duckdb_connect``."""
    import polars as pl
    paths = _paths_or_fail(crawl_root)
    frames = {name: pl.scan_delta(path) for name, path in paths.items()}
    files = segment_files(crawl_root)
    if files:  # segments fetched by older versions lack newer columns: filled with nulls
        frames["segments"] = pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")
    for view, table in HISTORY_VIEWS.items():
        if table in paths:
            frames[view] = pl.from_arrow(history_table(paths[table])).lazy()
    return frames


def deltalake_query(crawl_root: str, sql: str) -> Any:
    """Run ``sql`` with delta-rs's query engine (DataFusion, deletion vectors applied) over the
    tables registered by name; returns a pyarrow Table."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    builder = QueryBuilder()
    for name, path in _paths_or_fail(crawl_root).items():
        builder = builder.register(name, DeltaTable(path))
    return pa.table(builder.execute(sql).read_all())
