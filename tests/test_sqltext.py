"""crawl/sqltext.py: statement splitting and result rendering (no Spark)."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime

from crawl.sqltext import format_csv, format_json_lines, format_table, split_statements


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
    rows = [[1, "x", datetime(2026, 1, 2, 3, 4, 5), {"k": 2}, b"\x00\x01"], [None, "a,b", None, None, None]]
    table = format_table(columns, rows)
    lines = table.splitlines()
    assert lines[0].split(" | ")[0].strip() == "n" and lines[-1] == "(2 rows)"
    assert "2026-01-02 03:04:05" in table and '{"k":2}' in table and "NULL" in table
    assert list(csv.reader(io.StringIO(format_csv(columns, rows)))) == [
        columns, ["1", "x", "2026-01-02 03:04:05", '{"k":2}', "AAE="], ["", "a,b", "", "", ""]]
    parsed = [json.loads(line) for line in format_json_lines(columns, rows).splitlines()]
    assert parsed[0] == {"n": 1, "s": "x", "at": "2026-01-02 03:04:05", "m": {"k": 2}, "b": "AAE="}
    assert parsed[1]["n"] is None
    assert format_table(["x"], [["a" * 100]], max_width=10).splitlines()[2] == "aaaaaaa..."
