"""The Spark side of crawl/rule_ops.py: the ops on pyspark Columns, and orderings as Columns.

A rule written once in crawl/ over an ops object (crawl.rule_ops) becomes a Column expression
here, so the Spark path evaluates it inside the query (no Python UDF) and the driver path
evaluates the very same function on Python values with crawl.rule_ops.NUMPY_OPS.
"""
from __future__ import annotations

from typing import Any, Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F

from crawl.rule_ops import By


def _col(x: Any) -> Column:
    return x if isinstance(x, Column) else F.lit(x)


class ColumnOps:
    """crawl.rule_ops' ops on Columns (Python values become literals)."""

    @staticmethod
    def lit(x: Any) -> Column:
        return _col(x)

    @staticmethod
    def greatest(*xs: Any) -> Column:
        return F.greatest(*[_col(x) for x in xs])

    @staticmethod
    def least(*xs: Any) -> Column:
        return F.least(*[_col(x) for x in xs])

    @staticmethod
    def pow(base: Any, exponent: Any) -> Column:
        return F.pow(_col(base), _col(exponent))

    @staticmethod
    def when(condition: Any, then: Any, otherwise: Any) -> Column:
        return F.when(_col(condition), _col(then)).otherwise(_col(otherwise))

    @staticmethod
    def coalesce(*xs: Any) -> Column:
        return F.coalesce(*[_col(x) for x in xs])

    @staticmethod
    def is_null(x: Any) -> Column:
        return _col(x).isNull()

    @staticmethod
    def not_null(x: Any) -> Column:
        return _col(x).isNotNull()

    @staticmethod
    def neg(x: Any) -> Column:
        return -_col(x)

    @staticmethod
    def length(s: Any) -> Column:
        return F.length(_col(s))

    @staticmethod
    def endswith(s: Any, suffix: str) -> Column:
        return _col(s).endswith(suffix)

    @staticmethod
    def startswith(s: Any, prefix: str) -> Column:
        return _col(s).startswith(prefix)

    @staticmethod
    def xor(a: Any, b: Any) -> Column:
        return _col(a).bitwiseXOR(_col(b))

    @staticmethod
    def bit_count(x: Any) -> Column:
        return F.bit_count(_col(x))

    @staticmethod
    def isin(x: Any, values: Iterable[Any]) -> Column:
        return _col(x).isin(*values)


COLUMN_OPS = ColumnOps()


def spark_order(order: tuple[By, ...]) -> list[Column]:
    """``order`` as orderBy/Window Columns (asc: nulls first, desc: nulls last, Spark's defaults,
    which crawl.rule_ops.sort_key follows)."""
    return [F.col(by.field).desc() if by.descending else F.col(by.field).asc() for by in order]
