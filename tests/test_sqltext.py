"""crawl/sqltext.py: statement splitting, the read-only check and result rendering (no Spark)."""
from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from crawl.sqltext import format_csv, format_json_lines, format_table, split_statements, write_verb


def test_split_statements_respects_quotes_and_comments():
    script = """
    SELECT ';' AS a, "x;y" AS b, `we;ird` FROM t;  -- a comment; with a semicolon
    /* block; comment */ SELECT 2;
    ;
    -- only a comment
    """
    assert split_statements(script) == ["SELECT ';' AS a, \"x;y\" AS b, `we;ird` FROM t", "SELECT 2"]
    assert split_statements("SELECT 'it''s'; SELECT 'a\\';b'") == ["SELECT 'it''s'", "SELECT 'a\\';b'"]
    assert split_statements("  ") == []


def test_formats():
    columns = ["n", "s", "at", "m", "b"]
    rows = [[1, "x", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), {"k": 2}, b"\x00\x01"],
            [None, "a,b", None, None, None]]
    table = format_table(columns, rows)
    lines = table.splitlines()
    assert lines[0].split(" | ")[0].strip() == "n" and lines[-1] == "(2 rows)"
    assert "2026-01-02 03:04:05" in table and '{"k":2}' in table and "NULL" in table
    assert list(csv.reader(io.StringIO(format_csv(columns, rows)))) == [
        columns, ["1", "x", "2026-01-02 03:04:05+00:00", '{"k":2}', "AAE="], ["", "a,b", "", "", ""]]
    parsed = [json.loads(line) for line in format_json_lines(columns, rows).splitlines()]
    assert parsed[0] == {"n": 1, "s": "x", "at": "2026-01-02 03:04:05+00:00", "m": {"k": 2}, "b": "AAE="}
    assert parsed[1]["n"] is None
    assert format_table(["x"], [["a" * 100]], max_width=10).splitlines()[2] == "aaaaaaa..."


@pytest.mark.parametrize("statement, verb", [
    ("UPDATE hostdb SET url_count = 999", "UPDATE"),
    ("DELETE FROM crawldb WHERE status = 'gone'", "DELETE"),
    ("/* tidy */ delete from crawldb", "DELETE"),
    ("MERGE INTO crawldb t USING hostdb s ON t.host = s.host WHEN MATCHED THEN DELETE", "MERGE"),
    ("INSERT OVERWRITE crawldb SELECT * FROM crawldb", "INSERT"),
    ("WITH c AS (SELECT * FROM crawldb) INSERT INTO crawldb SELECT * FROM c", "INSERT"),
    ("FROM crawldb INSERT INTO hostdb SELECT *", "INSERT"),  # Spark's FROM-first multi-insert
    ("CREATE TABLE x USING delta AS SELECT 1", "CREATE"),
    ("CREATE TEMP VIEW v AS WITH c AS (SELECT 1) INSERT INTO t SELECT * FROM c", "INSERT"),
    ("REPLACE TABLE crawldb USING delta AS SELECT 1", "REPLACE"),
    ("DROP TABLE crawldb", "DROP"), ("TRUNCATE TABLE crawldb", "TRUNCATE"),
    ("ALTER TABLE crawldb SET TBLPROPERTIES ('a' = 'b')", "ALTER"),
    ("VACUUM crawldb RETAIN 0 HOURS", "VACUUM"), ("OPTIMIZE crawldb", "OPTIMIZE"),
    ("RESTORE TABLE crawldb TO VERSION AS OF 1", "RESTORE"), ("COPY INTO crawldb FROM '/x'", "COPY"),
])
def test_statements_that_may_write_are_named(statement, verb):
    assert write_verb(statement) == verb


@pytest.mark.parametrize("statement", [
    "SELECT status, count(*) FROM crawldb GROUP BY status",
    "select 'DELETE' AS d, replace(url, 'a', 'b') AS `update` FROM crawldb -- UPDATE hostdb",
    "WITH c AS (SELECT 1 AS n) SELECT * FROM c", "(SELECT 1) UNION (SELECT 2)", "VALUES (1), (2)",
    "SELECT * FROM crawldb VERSION AS OF 1", "SELECT * FROM table_changes('crawldb', 0)",
    "SHOW TABLES", "SHOW CREATE TABLE crawldb", "DESCRIBE HISTORY crawldb", "EXPLAIN DELETE FROM crawldb",
    "SET spark.sql.shuffle.partitions = 2", "DECLARE OR REPLACE VARIABLE wanted STRING DEFAULT 'fetched'",
    "CREATE OR REPLACE TEMPORARY VIEW due AS SELECT * FROM crawldb", "CACHE TABLE crawldb",
])
def test_statements_that_only_read_pass(statement):
    assert write_verb(statement) is None


def test_the_documented_sql_examples_only_read():
    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## SQL on the crawl database\n")
    texts = [readme[start:readme.find("\n## ", start + 1)], (repo / "docs" / "sql.md").read_text(encoding="utf-8")]
    blocks = [re.findall(r"^```sql\n(.*?)^```", text, re.M | re.S) for text in texts]
    assert all(blocks)  # both still show SQL
    statements = [s for found in blocks for block in found for s in split_statements(block)]
    assert len(statements) >= 10 and [s for s in statements if write_verb(s)] == []


def test_timestamps_say_their_zone():
    import time
    from datetime import date, datetime, timezone
    from crawl.sqltext import plain_value
    # PySpark gives naive datetimes in the process's local time; printed, they are UTC and say so
    local = datetime.fromtimestamp(1_767_268_800)  # 2026-01-01 12:00:00 UTC, in local time
    assert plain_value(local) == "2026-01-01 12:00:00+00:00"
    assert plain_value(datetime(2026, 1, 1, 12, tzinfo=timezone.utc)) == "2026-01-01 12:00:00+00:00"
    assert plain_value(date(2026, 1, 1)) == "2026-01-01" and time.time() > 0
