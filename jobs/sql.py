"""sql, shell, history — ask the crawl root's tables questions by name.

``deltacrawl sql`` answers through embedded DuckDB (crawl/sqlengine.py: about a second a query, no
JVM) unless given ``--engine spark`` (option sql.engine); without a query it is a SQL shell that
keeps its engine. What follows describes the Spark side: what ``--engine spark``, ``shell`` and
``history`` register, and what the notebook uses.

    deltacrawl sql "SELECT status, count(*) FROM crawldb GROUP BY status" [--format table|csv|json]
                   [--engine duckdb|spark] [--write]
    deltacrawl shell [--plain]
    deltacrawl history URL [--format table|csv|json]

Inputs:   the crawl root's Delta tables, registered under their names for the session:
          crawldb, hostdb, warc_index, dedup_pages, dedup_bands and cycles (each if it exists);
          the view ``segments`` (every segment's fetched URL rows, Parquet, with segment_id); the
          views ``crawldb_history`` / ``hostdb_history`` (DESCRIBE HISTORY as a table, plus
          step, cycle, segment and crawl_id from each commit's userMetadata: jobs/engine/commit_info.py).
          The Delta tables are session-only *tables* of Spark's in-memory catalog, not temporary
          views, because only tables take ``VERSION AS OF`` / ``TIMESTAMP AS OF``, ``DESCRIBE
          HISTORY`` and ``table_changes()`` by name (a view refuses time travel:
          UNSUPPORTED_FEATURE.TIME_TRAVEL). They are EXTERNAL (dropping one leaves its files
          alone) and vanish with the session. In a session with a Hive metastore they are
          temporary views instead, so nothing is written to a metastore; time travel then needs
          the path form, delta.`/abs/crawl-data/crawldb`.
Outputs:  sql: the result of the last statement (several, separated by ';', run in order) on
          stdout: an aligned table with a row count, CSV with a header, or one JSON object per
          line. shell: an interactive Python (IPython if installed, else the standard REPL; --plain
          forces the latter) with ``spark`` ready and the same names registered. history: the
          URL's states across crawldb versions, newest first, one line per version in which its
          row changed (from the Change Data Feed where it is on, else by time travel).
Re-run:   always safe: these commands write nothing. sql runs only statements that read
          (crawl.sqltext.write_verb) unless given --write: then UPDATE, DELETE, MERGE, DDL, VACUUM...
          change the live tables, in Delta commits labelled step "sql" (DESCRIBE HISTORY's
          userMetadata). shell is Python with a SparkSession: nothing stops it writing.
Exit:     0 done · 1 history: URL not in the crawldb · 2 bad SQL or input (one line on stderr),
          a statement that may write without --write, no crawldb · 3 failure.
Example:  deltacrawl sql --crawl-root /data/crawl --format csv "SELECT host, count(*) FROM crawldb GROUP BY host"
          spark-submit --jars "$(deltacrawl jars)" jobs/sql.py "SELECT ..." --crawl-root /data/crawl
"""
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, Mapping

from crawl.sqltext import FORMATS, KNOWN_WRITING_VERBS, format_rows, split_statements, write_verb
from jobs.engine.runtime import no_crawl_root, run_main
from jobs.engine.errors import EXIT_NOTHING_TO_DO, EXIT_OK, UserError

if TYPE_CHECKING:  # Spark is imported where it is used: `deltacrawl sql` on DuckDB starts without it
    from pyspark.sql import DataFrame, SparkSession

    from jobs.engine.crawl_root import CrawlRoot

# name -> path of each Delta table in a crawl root
TABLES = {
    "crawldb": lambda root: root.crawldb,
    "hostdb": lambda root: root.hostdb,
    "warc_index": lambda root: root.warc_index,
    "dedup_pages": lambda root: root.dedup_pages,
    "dedup_bands": lambda root: root.dedup_bands,
    "cycles": lambda root: f"{root.root}/cycles",
}
HISTORY_VIEWS = {"crawldb_history": "crawldb", "hostdb_history": "hostdb"}
# what userMetadata holds (jobs/engine/commit_info.py)
COMMIT_INFO_SCHEMA = "step STRING, segment STRING, cycle INT, crawl_id STRING"
ENGINES = ("duckdb", "spark")


def _sql_errors() -> tuple[type[Exception], ...]:
    """Errors in the SQL a user typed (exit 2); anything else is a failure (exit 3)."""
    from pyspark.errors import (AnalysisException, ArithmeticException, DateTimeException, IllegalArgumentException,
                                NumberFormatException)
    return (AnalysisException, ArithmeticException, DateTimeException, IllegalArgumentException,
            NumberFormatException)


def _quoted(path: str) -> str:
    return "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _uses_metastore(spark: SparkSession) -> bool:
    return spark.conf.get("spark.sql.catalogImplementation") != "in-memory"


def _register_table(spark: SparkSession, name: str, path: str) -> None:
    spark.catalog.dropTempView(name)  # a view of that name would hide the table
    if spark.catalog.tableExists(f"default.{name}"):
        kind = spark.catalog.getTable(f"default.{name}").tableType
        if kind != "EXTERNAL":
            raise UserError(f"this session's catalog has a {kind.lower()} table named {name}: "
                            f"drop or rename it first (deltacrawl registers the crawl root's tables by name)")
        spark.sql(f"DROP TABLE default.{name}")  # an external table: its files stay
    spark.sql(f"CREATE TABLE default.{name} USING delta LOCATION {_quoted(path)}")


def history_frame(spark: SparkSession, path: str) -> DataFrame:
    """DESCRIBE HISTORY of the table at ``path`` as a DataFrame, with userMetadata's step,
    cycle, segment and crawl_id as columns (null for commits made without them)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    info = F.from_json(F.col("userMetadata"), COMMIT_INFO_SCHEMA)
    return (DeltaTable.forPath(spark, path).history()
            .withColumns({"step": info["step"], "cycle": info["cycle"], "segment": info["segment"],
                          "crawl_id": info["crawl_id"]}))


def segments_frame(spark: SparkSession, root: CrawlRoot) -> DataFrame | None:
    """Every segment's fetched URL rows (one row per attempted URL, with segment_id), or None."""
    from jobs.engine.crawl_root import list_segments, path_exists
    # each segment's kind=url folder (several fetched/ roots with partition folders in one read
    # are refused: CONFLICTING_DIRECTORY_STRUCTURES)
    fetched = [f"{root.fetched(s)}/kind=url" for s in list_segments(spark, root) if _is_segment_id(s)]
    fetched = [p for p in fetched if path_exists(spark, p)]
    if not fetched:
        return None
    # mergeSchema: segments fetched by older versions lack the newer columns
    return spark.read.option("mergeSchema", "true").parquet(*fetched)


def _is_segment_id(name: str) -> bool:
    from jobs.engine.crawl_root import check_segment_id
    try:
        check_segment_id(name)
        return True
    except UserError:
        return False


def register_tables(spark: SparkSession, root: CrawlRoot) -> list[str]:
    """Register the crawl root's tables and views under their names (see the module docstring)
    and return the names. Call it again to see commits made since (the history views are
    snapshots) or another crawl root."""
    from jobs.engine.tables import table_exists
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root} (wrong --crawl-root? 'deltacrawl inject' makes one)")
    names = []
    metastore = _uses_metastore(spark)
    for name, path_of in TABLES.items():
        path = path_of(root)
        if not table_exists(spark, path):
            continue
        if metastore:
            spark.read.format("delta").load(path).createOrReplaceTempView(name)
        else:
            _register_table(spark, name, path)
        names.append(name)
    for view, table in HISTORY_VIEWS.items():
        if table in names:
            history_frame(spark, TABLES[table](root)).createOrReplaceTempView(view)
            names.append(view)
    segments = segments_frame(spark, root)
    if segments is not None:
        segments.createOrReplaceTempView("segments")
        names.append("segments")
    return names


def run_statements(spark: SparkSession, text: str) -> tuple[list[str], list[list[Any]]]:
    """Run every statement of ``text`` in order; the last one's columns and rows."""
    statements = split_statements(text)
    if not statements:
        raise UserError("no SQL statement given")
    frame = None
    try:
        for statement in statements:
            frame = spark.sql(statement)
        assert frame is not None
        rows = frame.collect()
    except _sql_errors() as exc:
        raise UserError(_one_line(exc)) from None
    return list(frame.columns), [list(r.asDict(recursive=True).values()) if frame.columns else [] for r in rows]


def run_writing_statements(spark: SparkSession, text: str) -> tuple[list[str], list[list[Any]]]:
    """run_statements for ``sql --write``: whatever Delta commits they make says step "sql"."""
    from jobs.engine.commit_info import writes_commits
    return writes_commits("sql")(run_statements)(spark, text)


def check_read_only(statements: list[str]) -> None:
    """Refuse (one line, exit 2) a script with a statement that may write, before a JVM starts."""
    for statement in statements:
        verb = write_verb(statement)
        if verb is None:
            continue
        if verb in KNOWN_WRITING_VERBS:
            raise UserError(f"{verb} may change the crawl root's tables, and deltacrawl sql only reads unless "
                            f"given --write")
        raise UserError(f"{verb!r} does not start a statement known to only read (SELECT, WITH, VALUES, TABLE, "
                        f"FROM, SHOW, DESCRIBE, EXPLAIN, SET, USE, CACHE, REFRESH): a typo? (--write passes "
                        f"any statement to Spark as written)")


def _one_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines[0].split()) if lines else ""
    return text[:500] if text else type(exc).__name__


def _quiet_sql_errors() -> None:
    """PySpark logs every failed query (with a traceback) on stderr; we print one line instead."""
    from pyspark.logger import PySparkLogger
    PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


# ---------------------------------------------------------------------------------------------
# history


HISTORY_COLUMNS = ("status", "http_status", "next_fetch_at", "lease_until", "segment_id", "last_fetched_at",
                   "fetch_interval_s", "fetch_count", "change_count", "retries", "content_hash", "dup_of",
                   "redirect_to", "error")


def _change_feed_start(history: list[dict[str, Any]]) -> int | None:
    """The first version from which the Change Data Feed covers every commit, or None."""
    start = None
    for entry in sorted(history, key=lambda h: h["version"]):
        props = (entry.get("operationParameters") or {}).get("properties") or ""
        if '"delta.enableChangeDataFeed":"true"' in props.replace(" ", ""):
            start = entry["version"] if start is None else start
        elif '"delta.enableChangeDataFeed":"false"' in props.replace(" ", ""):
            start = None
    return start


def url_history(spark: SparkSession, root: CrawlRoot, url: str) -> list[dict[str, Any]]:
    """The URL's crawldb row after each commit that changed it, newest first: version,
    timestamp, operation, step/cycle/segment of the commit, and the row's state (or
    status '(deleted)')."""
    from pyspark.sql import functions as F

    from crawl.net.urls import InvalidUrl, normalize_url, url_hash
    from jobs.engine.tables import table_exists
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root}")
    try:
        canonical = normalize_url(url)
    except InvalidUrl as exc:
        raise UserError(f"not a URL: {url} ({exc})") from None
    urls = sorted({url, canonical})
    match = F.col("url_hash").isin([url_hash(u) for u in urls]) & F.col("url").isin(urls)
    path = root.crawldb
    history = [r.asDict(recursive=True) for r in history_frame(spark, path).collect()]
    versions = sorted(h["version"] for h in history)
    columns = ["url", *HISTORY_COLUMNS]
    cdf_start = _change_feed_start(history)
    states: dict[int, dict[str, Any]] = {}
    # before the feed (or without it): the row in each version, by time travel
    travel_until = versions[-1] if cdf_start is None else cdf_start
    frames = [spark.read.format("delta").option("versionAsOf", v).load(path).filter(match)
              .select(*columns).withColumn("_version", F.lit(v)) for v in versions if v <= travel_until]
    if frames:
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        for row in union.collect():
            states[row["_version"]] = {c: row[c] for c in columns}
    if cdf_start is not None and cdf_start < versions[-1]:
        changes = (spark.read.format("delta").option("readChangeFeed", "true")
                   .option("startingVersion", cdf_start + 1).load(path).filter(match)
                   .filter(F.col("_change_type") != "update_preimage").collect())
        for row in changes:
            states[row["_commit_version"]] = (None if row["_change_type"] == "delete"
                                              else {c: row[c] for c in columns})
    meta = {h["version"]: h for h in history}
    out, previous = [], None
    for version in versions:
        if version in states:
            state = states[version]
        elif version <= travel_until:
            state = None  # time travel found no row: not (yet) in the crawldb
        else:
            state = previous  # the feed has no change for the URL in this commit
        if state != previous:
            h = meta[version]
            entry = {"version": version, "timestamp": h["timestamp"], "operation": h["operation"],
                     "step": h["step"], "cycle": h["cycle"], "commit_segment": h["segment"]}
            entry.update(state if state is not None else {"url": canonical, "status": "(deleted)"})
            out.append(entry)
        previous = state
    return list(reversed(out))


# ---------------------------------------------------------------------------------------------
# the commands


def _add_format(parser) -> None:
    parser.add_argument("--format", choices=sorted(FORMATS), default="table",
                        help="table (default: aligned, with a row count), csv (with a header) or json (one "
                             "object per line)")


def _session(cfg: Mapping[str, Any], crawl_root: str) -> tuple[SparkSession, CrawlRoot]:
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.session import build_spark
    root = CrawlRoot(crawl_root)
    if root.is_local and not path_exists_local(root):
        raise no_crawl_root(root.root)
    return build_spark(cfg, crawl_root), root


def path_exists_local(root: CrawlRoot) -> bool:
    import os
    return os.path.isdir(root.local_path(root.root))


def _is_local(crawl_root: str) -> bool:
    return "://" not in crawl_root or crawl_root.startswith("file://")


def spark_reason(statements: list[str], crawl_root: str, write: bool) -> str | None:
    """Why a script asked of the DuckDB engine needs Spark after all, or None: --write (DuckDB
    reads Delta only), a crawl root on object storage other than S3, or a Spark-only statement
    (DECLARE, CACHE, ...). Time travel, the Change Data Feed, DESCRIBE HISTORY and S3 need no
    Spark (crawl/sqlengine.py)."""
    from crawl.s3 import is_s3_uri
    from crawl.sqlengine import SPARK_ONLY_VERBS
    if write:
        return "--write"
    if not _is_local(crawl_root) and not is_s3_uri(crawl_root):
        return f"a crawl root on {crawl_root.split('://')[0]}://"
    for statement in statements:
        verb = (statement.lstrip("( \t\r\n").split(None, 1) or [""])[0].upper()
        if verb in SPARK_ONLY_VERBS:
            return f"{verb}, a statement of Spark SQL,"
    return None


class _Answerer:
    """One engine over one crawl root for as many scripts as asked (``deltacrawl sql`` asks one;
    its shell asks many, with the engine kept between them)."""

    def __init__(self, engine: str, cfg: Mapping[str, Any], crawl_root: str, write: bool):
        self.engine, self.write = engine, write
        if engine == "duckdb":
            from crawl.s3 import is_s3_uri
            from crawl.sqlengine import DuckDBEngine
            if not is_s3_uri(crawl_root) and not path_exists_local_path(crawl_root):
                raise no_crawl_root(crawl_root)
            try:  # (crawl.sqlengine.EngineUnavailable goes to the caller: Spark answers then)
                self.duck = DuckDBEngine(crawl_root.removeprefix("file://"), cfg)
            except OSError as exc:  # no crawldb; on S3: no bucket, bad keys, the endpoint down
                raise UserError(str(exc)) from None
        else:
            self.spark, self.root = _session(cfg, crawl_root)
            _quiet_sql_errors()
            register_tables(self.spark, self.root)

    def names(self) -> list[str]:
        if self.engine == "duckdb":
            return self.duck.names()
        return [t.name for t in self.spark.catalog.listTables()]

    def ask(self, statements: list[str]) -> tuple[list[str], list[list[Any]]]:
        if not self.write:
            check_read_only(statements)
        if self.engine == "spark":
            text = ";\n".join(statements)
            return (run_writing_statements if self.write else run_statements)(self.spark, text)
        from crawl.sqlengine import SqlError
        try:
            return self.duck.run(statements)
        except SqlError as exc:
            message = str(exc)
            if message.startswith(("[Parser Error]", "[Not implemented Error]")) or (
                    message.startswith("[Catalog Error]") and "Function" in message):
                message += " (this is DuckDB's SQL dialect; Spark SQL's: --engine spark)"
            raise UserError(message) from None


def path_exists_local_path(crawl_root: str) -> bool:
    import os
    return os.path.isdir(crawl_root.removeprefix("file://"))


SQL_SHELL_BANNER = """deltacrawl sql ({engine}): crawl root {root}
  tables  {names}
  end a statement with ';' · results as --format {format} · \\q or Ctrl-D quits"""


def sql_shell(answerer: _Answerer, crawl_root: str, fmt: str) -> int:
    """Read statements (each ended by ';') and print each one's result; a mistake is one line
    and the shell goes on. The engine stays up between statements."""
    try:
        import readline  # noqa: F401 - line editing and history for input()
    except ImportError:
        pass
    interactive = sys.stdin.isatty()
    if interactive:
        print(SQL_SHELL_BANNER.format(engine=answerer.engine, root=crawl_root, format=fmt,
                                      names=", ".join(answerer.names())), file=sys.stderr, flush=True)
    pending: list[str] = []
    while True:
        try:
            line = input("sql> " if not pending else "...> ") if interactive else sys.stdin.readline()
        except EOFError:
            line = ""
        except KeyboardInterrupt:
            print(file=sys.stderr)
            pending = []
            continue
        if not interactive and line == "":
            line = None
        if line is None or (not pending and line.strip() in ("\\q", "exit", "quit")):
            break
        pending.append(line.rstrip("\n"))
        text = "\n".join(pending)
        if not text.strip():
            pending = []
            continue
        if not text.rstrip().endswith(";"):
            continue
        pending = []
        statements = split_statements(text)
        if not statements:
            continue
        try:
            columns, rows = answerer.ask(statements)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            continue
        if columns:
            sys.stdout.write(format_rows(fmt, columns, rows))
        sys.stdout.flush()
    if pending and "\n".join(pending).strip():  # input ended without ';': run what is left
        try:
            columns, rows = answerer.ask(split_statements("\n".join(pending)))
            if columns:
                sys.stdout.write(format_rows(fmt, columns, rows))
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    return EXIT_OK


def sql_main(argv: list[str] | None = None) -> int:
    def configure(parser) -> None:
        parser.description = ("Run SQL on the crawl root's tables, registered by name (crawldb, hostdb, "
                              "warc_index, dedup_pages, dedup_bands, cycles, segments, crawldb_history, "
                              "hostdb_history); prints the last statement's result. Without SQL: a shell "
                              "that keeps its engine between statements. Answered by DuckDB unless "
                              "--engine spark (option sql.engine).")
        parser.add_argument("statements", metavar="SQL", nargs="?",
                            help="one or more statements separated by ';' ('-' reads them from stdin); "
                                 "none: an interactive SQL shell")
        _add_format(parser)
        parser.add_argument("--engine", choices=ENGINES,
                            help="duckdb (default, option sql.engine: embedded, about a second a query) or "
                                 "spark (Spark SQL, as the cluster and notebooks run it)")
        parser.add_argument("--write", action="store_true",
                            help="also run statements that change tables (UPDATE, DELETE, MERGE, INSERT, DDL, "
                                 "VACUUM, ...) on the live crawl root (on Spark); without it they are refused")

    def body(args, cfg) -> int:
        engine = args.engine or cfg.sql.engine
        if engine not in ENGINES:
            raise UserError(f"sql.engine is {engine!r}: one of {', '.join(ENGINES)}")
        statements: list[str] = []
        if args.statements is not None:
            text = sys.stdin.read() if args.statements == "-" else args.statements
            statements = split_statements(text)
            if not statements:
                raise UserError("no SQL statement given")
            if not args.write:
                check_read_only(statements)  # before any engine starts
        if engine == "duckdb":
            reason = spark_reason(statements, args.crawl_root, args.write)
            if reason is None:
                try:
                    import crawl.sqlengine  # noqa: F401
                    import duckdb  # noqa: F401
                except ImportError:
                    reason = "DuckDB not being installed (pip install -e .)"
            if reason is not None:
                print(f"deltacrawl sql: {reason} needs Spark: answering with --engine spark", file=sys.stderr,
                      flush=True)
                engine = "spark"
        from crawl.sqlengine import EngineUnavailable  # pure Python: neither DuckDB nor Spark yet
        try:
            answerer = _Answerer(engine, cfg, args.crawl_root, args.write)
        except EngineUnavailable as exc:
            print(f"deltacrawl sql: DuckDB cannot read {args.crawl_root} here ({exc}): answering with --engine "
                  f"spark", file=sys.stderr, flush=True)
            answerer = _Answerer("spark", cfg, args.crawl_root, args.write)
        if args.statements is None:
            return sql_shell(answerer, args.crawl_root, args.format)
        columns, rows = answerer.ask(statements)
        if columns:
            sys.stdout.write(format_rows(args.format, columns, rows))
        sys.stdout.flush()
        return EXIT_OK
    return run_main("deltacrawl sql", argv, configure, body, needs_root=False)


SHELL_BANNER = """deltacrawl shell: crawl root {root}
  spark      a SparkSession with Delta Lake
  tables     {names}
  e.g.       spark.sql("SELECT status, count(*) AS urls FROM crawldb GROUP BY status").show()
             spark.sql("DESCRIBE HISTORY crawldb").select("version", "operation", "userMetadata").show()
  register_tables(spark, root) again to see commits made since the shell started."""


def shell_main(argv: list[str] | None = None) -> int:
    def configure(parser) -> None:
        parser.description = ("An interactive Python with a ready SparkSession `spark` and the crawl root's "
                              "tables registered by name (IPython if installed).")
        parser.add_argument("--plain", action="store_true", help="the standard Python REPL even if IPython is "
                                                                 "installed")

    def body(args, cfg) -> int:
        spark, root = _session(cfg, args.crawl_root)
        names = register_tables(spark, root)
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F
        namespace = {"spark": spark, "F": F, "DeltaTable": DeltaTable, "root": root,
                     "register_tables": register_tables, "sql": lambda q: spark.sql(q)}
        banner = SHELL_BANNER.format(root=root.root, names=", ".join(names))
        try:
            if args.plain:
                raise ImportError
            import IPython
        except ImportError:
            import code
            code.interact(banner=banner, local=namespace, exitmsg="")
        else:
            print(banner, flush=True)
            IPython.start_ipython(argv=["--no-banner"], user_ns=namespace)
        return EXIT_OK
    return run_main("deltacrawl shell", argv, configure, body, needs_root=False)


def history_main(argv: list[str] | None = None) -> int:
    def configure(parser) -> None:
        parser.description = ("The URL's states across crawldb versions (Delta time travel / Change Data "
                              "Feed), newest first: one line per commit that changed its row.")
        parser.add_argument("url", metavar="URL")
        _add_format(parser)

    def body(args, cfg) -> int:
        spark, root = _session(cfg, args.crawl_root)
        entries = url_history(spark, root, args.url)
        if not entries:
            print(f"deltacrawl history: {args.url} is not in the crawldb", file=sys.stderr)
            return EXIT_NOTHING_TO_DO
        columns = list(entries[0])
        sys.stdout.write(format_rows(args.format, columns, [[e.get(c) for c in columns] for e in entries]))
        return EXIT_OK
    return run_main("deltacrawl history", argv, configure, body, needs_root=False)


def main(argv: list[str] | None = None) -> int:
    return sql_main(argv)


if __name__ == "__main__":
    sys.exit(main())
