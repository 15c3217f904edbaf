"""deltacrawl sql's engines: every documented query (docs/sql.md and the README's SQL section) gives
the same answer through embedded DuckDB (crawl/sqlengine.py, the default) as through Spark SQL
(--engine spark); the command's formats, errors, shell and routing on DuckDB; and DuckDB's answers
to Spark's spellings (time travel, table_changes, DESCRIBE HISTORY) on their own.

The crawl is the run's shared one (conftest's named_crawl: three cycles of the named test web with
the demo's hostile hosts, so the questions about failures and traps have answers), built by whichever
module asks first; these tests only read it, and take seconds once it is there.
"""
from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def crawled(named_crawl):
    """The shared crawl's root and its number of cycles."""
    return named_crawl.root, named_crawl.cycles


def test_duckdb_has_every_name_spark_registers(spark, crawled):
    """The first test to ask for the shared crawl waits for it (or builds it) within its own time
    bound, so the comparisons below have theirs for themselves."""
    from crawl.sqlengine import DuckDBEngine
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.sql import register_tables
    root, _ = crawled
    assert sorted(DuckDBEngine(root).names()) == sorted(register_tables(spark, CrawlRoot(root)))


# ---------------------------------------------------------------------------------------------
# the documented queries on both engines


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def documented_queries() -> list[str]:
    """Every SQL statement of the README's SQL section and of docs/sql.md, in order."""
    from crawl.sqltext import split_statements
    readme = _section((REPO / "README.md").read_text(encoding="utf-8"), "SQL on the crawl database")
    docs = (REPO / "docs" / "sql.md").read_text(encoding="utf-8")
    return [s for text in (readme, docs) for block in re.findall(r"^```sql\n(.*?)^```", text, re.M | re.S)
            for s in split_statements(block)]


def _plain(value):
    """One answer's value, comparable across engines: numbers to 6 significant digits, times as
    UTC milliseconds, maps as sorted pairs."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float, Decimal)):
        number = float(value)
        return 0.0 if number == 0 else round(number, 5 - int(math.floor(math.log10(abs(number)))))
    if isinstance(value, datetime):
        if value.tzinfo is None:  # PySpark: naive, in this process's local time
            value = value.astimezone()
        return value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return str(value)


def _answer(columns, rows, keep=None):
    """Sorted rows of plain values (only the columns ``keep`` names, if given)."""
    index = [i for i, c in enumerate(columns) if keep is None or c in keep]
    return sorted((tuple(_plain(row[i]) for i in index) for row in rows), key=repr)


# When a commit happened: Spark's Delta gives the log file's modification time, delta-rs the time in
# the commit's own record, some milliseconds apart; the rows are the same commits (and the time travel
# done with them reaches the same versions, which the answers that depend on it show).
COMMIT_TIMES = {"timestamp", "_commit_timestamp"}


def test_every_documented_query_answers_the_same_on_duckdb_and_spark(spark, crawled):
    from crawl.sqlengine import DuckDBEngine
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.sql import register_tables, run_statements
    root, _ = crawled
    register_tables(spark, CrawlRoot(root))
    duck = DuckDBEngine(root)
    queries = documented_queries()
    assert len(queries) >= 12
    nonempty = 0
    for query in queries:
        spark_columns, spark_rows = run_statements(spark, query)
        duck_columns, duck_rows = duck.run([query])
        keep = [c for c in spark_columns if c not in COMMIT_TIMES]
        assert [c.lower() for c in duck_columns if c in keep] == [c.lower() for c in keep], query
        got = _answer(duck_columns, duck_rows, keep)
        want = _answer(spark_columns, spark_rows, keep)
        if got != want and "current_timestamp()" in query:
            # "now" moved between the two answers: a URL may have come due in between (the
            # answer only grows); Spark asked again after DuckDB bounds it from the other side
            want_after = _answer(*run_statements(spark, query), keep)
            assert got in (want, want_after), query
        else:
            assert got == want, f"DuckDB and Spark answer differently:\n{query}"
        nonempty += bool(spark_rows)
    # the crawl gives nearly every question something to answer (the failures, the traps, cycle
    # 2's state, the change feed since version 3), so equal answers are not equal emptiness
    assert nonempty >= len(queries) - 1


# ---------------------------------------------------------------------------------------------
# Spark's spellings, answered by DuckDB


def test_time_travel_change_feed_and_history_without_spark(spark, crawled):
    from crawl.sqlengine import DuckDBEngine, SqlError
    root, result = crawled
    duck = DuckDBEngine(root)
    crawldb = f"{root}/crawldb"
    versions = [r["version"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{crawldb}`").collect()]
    latest = max(versions)
    for version in (1, latest - 1):
        want = spark.read.format("delta").option("versionAsOf", version).load(crawldb).count()
        assert duck.run([f"SELECT count(*) FROM crawldb VERSION AS OF {version}"])[1] == [[want]]
    # a timestamp between two commits reaches the older one (Delta's rule), here through a quoted
    # literal and through FOR SYSTEM_TIME AS OF
    _, stamps = duck.run(["SELECT version, timestamp FROM crawldb_history ORDER BY version"])
    between = stamps[2][1] + (stamps[3][1] - stamps[2][1]) / 2
    want = spark.read.format("delta").option("versionAsOf", stamps[2][0]).load(crawldb).count()
    assert duck.run([f"SELECT count(*) FROM crawldb FOR SYSTEM_TIME AS OF '{between.isoformat()}'"])[1] == [[want]]
    # the same table twice, at two versions, in one statement (a string holding the words is left alone)
    _, rows = duck.run([f"SELECT (SELECT count(*) FROM crawldb VERSION AS OF 1), "
                        f"(SELECT count(*) FROM crawldb VERSION AS OF {latest}), 'crawldb VERSION AS OF 2'"])
    assert rows[0][2] == "crawldb VERSION AS OF 2" and rows[0][1] > rows[0][0] > 0
    for bad, words in ((f"SELECT * FROM crawldb VERSION AS OF {latest + 5}", f"versions 0 to {latest}"),
                       ("SELECT * FROM crawldb TIMESTAMP AS OF '2001-01-01'", "no version as of"),
                       ("SELECT * FROM table_changes('nosuch', 1)", "no table nosuch")):
        with pytest.raises(SqlError, match=words):
            duck.run([bad])
    # the change feed between two versions, as Spark has it
    query = ("SELECT _change_type, _commit_version, url, status FROM table_changes('crawldb', 2, 4) "
             "WHERE _change_type <> 'update_preimage'")
    spark_rows = spark.sql(query.replace("'crawldb'", f"'delta.`{crawldb}`'")).collect()
    assert _answer(*duck.run([query])) == _answer(["a", "b", "c", "d"], [list(r) for r in spark_rows]) != []
    # DESCRIBE HISTORY: Spark's columns, newest first
    columns, rows = duck.run(["DESCRIBE HISTORY crawldb LIMIT 2"])
    spark_history = spark.sql(f"DESCRIBE HISTORY delta.`{crawldb}` LIMIT 2")
    assert columns == spark_history.columns
    keep = ["version", "operation", "readVersion", "isolationLevel", "isBlindAppend", "userMetadata", "engineInfo"]
    assert [[r[columns.index(c)] for c in keep] for r in rows] == [[r[c] for c in keep] for r in spark_history.collect()]
    # Spark's function names that DuckDB spells otherwise
    _, rows = duck.run(["SELECT size(collect_list(status)), size(collect_set(status)), current_date() = "
                        "CAST(current_timestamp() AS DATE), count(*) FROM crawldb"])
    count, distinct = rows[0][3], spark.read.format("delta").load(crawldb).select("status").distinct().count()
    assert rows[0][:3] == [count, distinct, True]


# ---------------------------------------------------------------------------------------------
# the command


def test_sql_command_on_duckdb_prints_what_spark_prints(crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    query = "SELECT status, count(*) AS urls, max(last_fetched_at) AS last FROM crawldb GROUP BY status ORDER BY status"
    outputs = {}
    for engine in ("duckdb", "spark"):
        for fmt in ("table", "csv", "json"):
            assert main(["sql", "--engine", engine, "--format", fmt, "--crawl-root", root, query]) == 0
            outputs[engine, fmt] = capfd.readouterr().out
    for fmt in ("table", "csv", "json"):
        assert outputs["duckdb", fmt] == outputs["spark", fmt], fmt
    assert outputs["duckdb", "table"].splitlines()[0].split() == ["status", "|", "urls", "|", "last"]
    assert all(set(json.loads(line)) == {"status", "urls", "last"} for line in outputs["duckdb", "json"].splitlines())


def test_sql_command_mistakes_are_one_line_and_exit_2(crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    for bad, words in (("SELECT nope FROM crawldb", '[Binder Error] Referenced column "nope" not found'),
                       ("SELECT * FROM no_such_table", "[Catalog Error] Table with name no_such_table"),
                       ("SELECT status FROM crawldb WHER x", "--engine spark"),
                       ("SELECT * FROM crawldb VERSION AS OF 9999", "not 9999"),
                       ("UPDATE crawldb SET status = 'x'", "only reads unless given --write")):
        assert main(["sql", bad, "--crawl-root", root]) == 2, bad
        captured = capfd.readouterr()
        lines = captured.err.strip().splitlines()
        assert captured.out == "" and len(lines) == 1 and lines[0].startswith("deltacrawl sql: error: "), captured
        assert words in lines[0], lines[0]
    assert main(["sql", "SELECT 1", "--crawl-root", str(Path(root).parent / "missing")]) == 2
    assert "no crawl root" in capfd.readouterr().err


def test_spark_only_statements_are_answered_by_spark_with_a_note(crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    assert main(["sql", "--format", "csv", "--crawl-root", root,
                 "DECLARE OR REPLACE VARIABLE wanted STRING DEFAULT 'fetched'; "
                 "SELECT count(*) AS n FROM crawldb WHERE status = wanted"]) == 0
    captured = capfd.readouterr()
    assert captured.out.splitlines()[0] == "n" and int(captured.out.splitlines()[1]) > 0
    assert "DECLARE, a statement of Spark SQL, needs Spark: answering with --engine spark" in captured.err


def test_sql_without_a_query_is_a_shell_that_keeps_its_engine(crawled, monkeypatch, capfd):
    from jobs.cli import main
    root, _ = crawled
    monkeypatch.setattr("sys.stdin", io.StringIO(
        "SELECT count(*) AS n\n  FROM crawldb;\n"        # a statement over two lines
        "SELECT nope FROM crawldb;\n"                    # a mistake: one line, and the shell goes on
        "CREATE TEMP VIEW fetched AS SELECT * FROM crawldb WHERE status = 'fetched';\n"
        "SELECT count(*) AS f FROM fetched;\n"           # the same engine: the view is still there
        "SELECT 'no semicolon at the end' AS last\n"))
    assert main(["sql", "--format", "csv", "--crawl-root", root]) == 0
    captured = capfd.readouterr()
    out = captured.out.splitlines()
    assert out[0::2] == ["n", "f", "last"] and out[5] == "no semicolon at the end", out
    assert int(out[1]) > int(out[3]) > 0
    assert [line for line in captured.err.splitlines() if line.startswith("error:")] == [
        next(line for line in captured.err.splitlines() if "Referenced column \"nope\"" in line)]


def test_sql_command_on_duckdb_starts_no_spark(crawled):
    """The whole command in a fresh process, as a user runs it: the answer, and no pyspark imported."""
    root, _ = crawled
    code = ("import sys; from jobs.cli import main; "
            "rc = main(['sql', '--format', 'json', '--crawl-root', sys.argv[1], "
            "'SELECT count(*) AS n FROM crawldb VERSION AS OF 1']); "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] > 0


# ---------------------------------------------------------------------------------------------
# a crawl root on S3


def _upload(endpoint: str, local: Path, bucket: str, prefix: str) -> None:
    """The crawl root copied into the bucket as s3a writes one (the same relative paths; the local
    file system's .crc checksum files stay behind)."""
    import boto3

    from tests.s3server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY
    client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=REGION,
                                            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY)
    for path in sorted(local.rglob("*")):
        if path.is_file() and not (path.name.startswith(".") and path.name.endswith(".crc")):
            client.upload_file(str(path), bucket, f"{prefix}{path.relative_to(local).as_posix()}")


MARK = "-- answer {} --"


def test_a_crawl_root_on_s3_is_answered_by_duckdb_as_on_disk(crawled, moto_s3, tmp_path):
    """The shared crawl copied into a bucket of the moto server, and every documented query asked
    of it in one `deltacrawl sql` shell, a process of its own as a user runs it (the moto server
    lives in this process: delta-rs's calls hold the GIL while they wait for it), with the standard
    AWS variables pointing at the server: the answers are the ones DuckDB gives on the local copy,
    which the test above checks against Spark's; and no JVM started. A bucket that does not exist
    is one line, exit 2."""
    from crawl.sqlengine import DuckDBEngine
    from crawl.sqltext import format_rows
    from tests.s3server import aws_environ, new_bucket
    root, _ = crawled
    bucket = new_bucket(moto_s3, "sql")
    _upload(moto_s3, Path(root), bucket, "crawl/")
    queries = documented_queries()
    script = "".join(f"SELECT '{MARK.format(i)}' AS mark;\n{query};\n" for i, query in enumerate(queries))
    env = dict(__import__("os").environ, **aws_environ(moto_s3))
    code = ("import sys; from jobs.cli import main; rc = main(sys.argv[1:]); "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "sql", "--format", "json", "--crawl-root",
                           f"s3a://{bucket}/crawl"], input=script, capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=env)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr
    answers = re.split(r'^\{"mark": "-- answer \d+ --"\}\n', done.stdout, flags=re.M)[1:]
    assert len(answers) == len(queries), done.stdout[-2000:]
    local = DuckDBEngine(root)

    def rows(lines: str) -> list[str]:  # (a map's entries may come in another order: the same map)
        return sorted(json.dumps(json.loads(line), sort_keys=True) for line in lines.splitlines())
    for query, answer in zip(queries, answers):
        want = format_rows("json", *local.run([query]))
        if rows(answer) != rows(want) and "current_timestamp()" in query:
            want = format_rows("json", *local.run([query]))  # "now" moved: a URL may have come due
        assert rows(answer) == rows(want), query
    assert sum(bool(a) for a in answers) >= len(queries) - 1
    missing = subprocess.run([sys.executable, "-m", "jobs.cli", "sql", "--crawl-root", "s3a://no-such-bucket-here/crawl",
                              "SELECT 1"], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        "deltacrawl sql: error: listing s3a://no-such-bucket-here/crawl: no such bucket "
        "(The specified bucket does not exist)"], missing.stderr


def test_duckdb_says_why_it_cannot_read_s3_so_spark_answers(moto_s3, tmp_path, monkeypatch):
    """When DuckDB cannot read an S3 crawl root here, the engine says why in a few words
    (deltacrawl sql prints them in its one line before answering with Spark): an httpfs extension
    that does not load (a damaged file in its place, in a process of its own), or no keys to give
    it (credentials only a machine role holds)."""
    import os
    import duckdb

    from crawl.sqlengine import DuckDBEngine, EngineUnavailable
    from tests.s3server import aws_environ
    damaged = tmp_path / "duckdb_extension_httpfs"
    (damaged / "extensions" / f"v{duckdb.__version__}").mkdir(parents=True)
    (damaged / "__init__.py").write_text("")
    (damaged / "extensions" / f"v{duckdb.__version__}" / "httpfs.duckdb_extension").write_bytes(b"\0not an extension" * 64)
    code = ("from crawl.sqlengine import DuckDBEngine, EngineUnavailable\n"
            "try:\n    DuckDBEngine('s3a://bucket/crawl')\nexcept EngineUnavailable as exc:\n    print(exc)")
    env = dict(os.environ, **aws_environ(moto_s3), PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert done.returncode == 0 and done.stdout.startswith("DuckDB's httpfs extension does not load: "), done
    assert len(done.stdout.strip().splitlines()) == 1
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(EngineUnavailable, match="instance or container role"):
        DuckDBEngine("s3a://bucket/crawl")
