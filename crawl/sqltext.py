"""SQL text in, query results out as text: splitting a script into statements, and rendering
rows as an aligned table, CSV or JSON lines (``deltacrawl sql``, ``deltacrawl history``).

Plain values only: rows are sequences of Python values (None, numbers, strings, datetimes,
bytes, lists, dicts) as Spark's ``Row.asDict(recursive=True)`` gives them.
"""
from __future__ import annotations

import base64
import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterable, Sequence

import sqlparse


def split_statements(text: str) -> list[str]:
    """The statements of a SQL script, without comments and trailing ``;``, empty ones dropped.
    Splitting and comment removal are sqlparse's (quotes, backticks, escapes and comments
    respected), not a scanner of our own."""
    statements = (sqlparse.format(part, strip_comments=True).strip().rstrip(";").rstrip()
                  for part in sqlparse.split(text))
    return [statement for statement in statements if statement]


def plain_value(value: Any) -> Any:
    """A JSON-compatible form of one result value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
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
