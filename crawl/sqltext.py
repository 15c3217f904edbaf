"""SQL text in, query results out as text: splitting a script into statements, telling the
statements that only read from those that may write, and rendering rows as an aligned table,
CSV or JSON lines (``deltacrawl sql``, ``deltacrawl history``).

Plain values only: rows are sequences of Python values (None, numbers, strings, datetimes,
bytes, lists, dicts) as Spark's ``Row.asDict(recursive=True)`` gives them.
"""
from __future__ import annotations

import base64
import csv
import io
import json
import re
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any, Iterable, Sequence

import sqlparse
from sqlparse import tokens as T


def split_statements(text: str) -> list[str]:
    """The statements of a SQL script, without comments and trailing ``;``, empty ones dropped.
    Splitting and comment removal are sqlparse's (quotes, backticks, escapes and comments
    respected), not a scanner of our own."""
    statements = (sqlparse.format(part, strip_comments=True).strip().rstrip(";").rstrip()
                  for part in sqlparse.split(text))
    return [statement for statement in statements if statement]


# What a statement of ``deltacrawl sql`` may begin with when it runs without --write: queries,
# and statements that change only the session (settings, variables, cache, current database).
READ_ONLY_VERBS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "FROM", "SET", "RESET", "USE", "DECLARE",
                             "CACHE", "UNCACHE", "CLEAR", "REFRESH"})
# ... and statements that describe another without running it (EXPLAIN INSERT ... inserts nothing).
DESCRIBING_VERBS = frozenset({"SHOW", "DESCRIBE", "DESC", "EXPLAIN"})
# Data-changing verbs found anywhere in a statement (REPLACE is left out: inside a statement it is
# "OR REPLACE", of a DECLARE or of a CREATE, the latter DDL anyway; a leading REPLACE TABLE is not
# in READ_ONLY_VERBS).
WRITING_DML = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT"})
# Leading verbs of Spark SQL and Delta statements that change tables or files (for the message only:
# any verb not in READ_ONLY_VERBS is refused without --write, a typo too).
KNOWN_WRITING_VERBS = WRITING_DML | frozenset({
    "CREATE", "DROP", "ALTER", "TRUNCATE", "REPLACE", "VACUUM", "OPTIMIZE", "RESTORE", "REORG", "CONVERT",
    "CLONE", "COPY", "LOAD", "MSCK", "FSCK", "ANALYZE", "GENERATE", "REPAIR", "ADD", "GRANT", "REVOKE"})
# A temporary view lives in the session only: CREATE [OR REPLACE] [GLOBAL] TEMP[ORARY] VIEW.
_TEMP_VIEW = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:GLOBAL\s+)?TEMP(?:ORARY)?\s+VIEW\s", re.I)


def write_verb(statement: str) -> str | None:
    """The word that makes one statement a possible write to a table (``UPDATE``, ``MERGE``,
    ``VACUUM``, ``CREATE``, ...), or None when it only reads. An allow-list of leading verbs
    (READ_ONLY_VERBS, DESCRIBING_VERBS), then no WRITING_DML and no DDL anywhere (which
    refuses ``WITH ... INSERT`` and Spark's ``FROM t INSERT INTO ...``). Tokens are sqlparse's,
    so quoted text and comments never count. A guard against mistakes, not a sandbox: Spark's
    ``reflect``/``java_method`` can still call Java from a SELECT."""
    parsed = sqlparse.parse(statement)
    tokens = [t for t in parsed[0].flatten() if not t.is_whitespace and t.ttype not in T.Comment] if parsed else []
    first = next((t for t in tokens if t.ttype not in T.Punctuation), None)
    if first is None:
        return None
    verb = first.normalized.upper().split()[0]
    if verb in DESCRIBING_VERBS:
        return None
    temp_view = _TEMP_VIEW.match(statement.lstrip("( \t\r\n")) is not None and first.ttype in T.Keyword.DDL
    if verb not in READ_ONLY_VERBS and not temp_view:
        return verb
    for token in tokens:
        if token is first and temp_view:
            continue
        word = token.normalized.upper().split()[0]
        if token.ttype in T.Keyword.DDL or (token.ttype in T.Keyword.DML and word in WRITING_DML):
            return word
    return None


def plain_value(value: Any) -> Any:
    """A JSON-compatible form of one result value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        # PySpark hands timestamps over as naive datetimes in this process's local time: say the
        # zone, in UTC (the sessions' spark.sql.session.timeZone), so no reader has to guess
        try:
            return value.astimezone(timezone.utc).isoformat(sep=" ")
        except (OverflowError, ValueError, OSError):  # year 1 or 9999: beyond the platform's clock
            return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    return str(value)


def cell_text(value: Any) -> str:
    """One value as a table or CSV cell: NULL for null, JSON for nested values."""
    value = plain_value(value)
    if value is None:
        return "NULL"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def format_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], max_width: int = 80) -> str:
    """An aligned text table (cells longer than ``max_width`` end in '...'; 0: no limit), with
    a row count at the end."""
    def fit(text: str) -> str:
        text = text.replace("\n", "\\n")
        return text if not max_width or len(text) <= max_width else text[:max_width - 3] + "..."
    rows = [list(row) for row in rows]
    cells = [[fit(cell_text(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(v is None or (isinstance(v, (int, float, Decimal)) and not isinstance(v, bool))
                   for v in (row[i] for row in rows)) for i in range(len(columns))]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [" | ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), line]
    for row in cells:
        out.append(" | ".join(v.rjust(w) if numeric[i] and v != "NULL" else v.ljust(w)
                              for i, (v, w) in enumerate(zip(row, widths))).rstrip())
    out.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(out) + "\n"


def format_csv(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """CSV with a header line; null is an empty field, nested values are JSON."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else cell_text(v) for v in row])
    return buf.getvalue()


def format_json_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """One JSON object per row and line."""
    return "".join(json.dumps({c: plain_value(v) for c, v in zip(columns, row)}, ensure_ascii=False) + "\n"
                   for row in rows)


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json_lines}


def format_rows(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return FORMATS[fmt](columns, rows)
