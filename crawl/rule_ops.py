"""One definition of a rule for both of a step's paths: the driver's Python and Spark's Columns.

generate, dedup and update each decide small inputs on the driver and large ones with Spark
queries (one rule, one implementation: docs/architecture.md, "Small inputs skip Spark's planning"). A rule that must run inside a Spark query
without a Python UDF (a UDF would make every row cross to a Python worker and back) is written
once here in crawl/, over an *ops* object, and evaluated twice:

* ``NUMPY_OPS`` (this module): on Python numbers or numpy arrays, element-wise, with SQL's null
  as None or NaN; the driver path, and bench/ on whole simulated webs;
* ``jobs.engine.column_ops.COLUMN_OPS``: on pyspark Columns; the Spark path. (crawl/ never imports
  pyspark: tests/test_purity.py.)

Arithmetic (``+ - * /``) and comparisons (``< <= > >= ==``) are the operands' own operators; the
rest goes through the ops: ``lit``, ``greatest``/``least`` (null-skipping, as Spark's), ``pow``,
``when`` (if-then-else), ``coalesce``, ``is_null``/``not_null``, ``neg``, ``length``, ``endswith``, ``startswith``, ``xor``, ``bit_count``, ``isin``. Rules that compare times
take them in whatever form the path compares: timestamps in Spark, whole microseconds on the
driver (``NUMPY_OPS.micros``: epoch seconds rounded as jobs.engine.schemas.from_epoch_col stores them).

Nulls: a comparison with a null is null in SQL and False in numpy, and both count as "no" in
``when`` and in a filter; ``&`` and ``|`` agree with that. What would not agree is negating a
condition that can be null (NOT null is null, ~False is True): rules never do; they test
``not_null`` first.

Orderings (a host's best URLs, a pool's best, new URLs within a host's budget) are written once
as a tuple of ``By`` specs; ``sort_key`` derives the Python sort key and
jobs.engine.column_ops.spark_order the Spark ``orderBy``/Window ordering, with Spark's null placement
(ascending: nulls first; descending: nulls last) and Spark's string order (UTF-8 bytes, which is
code-point order: Python's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np


def _is_null_scalar(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _array(x: Any) -> bool:
    # isinstance, not np.ndim: the driver calls the rules per row, and np.ndim costs ~3 us
    return isinstance(x, np.ndarray)


def epoch_micros(epoch: float) -> int:
    """Epoch seconds as whole microseconds, rounded half away from zero: how deltacrawl's jobs
    turn them into Spark timestamps (jobs.engine.schemas.from_epoch_col), so Python compares times as
    Spark does."""
    return int(epoch * 1e6 + 0.5) if epoch >= 0 else -int(-epoch * 1e6 + 0.5)


class NumpyOps:
    """The ops on Python numbers and numpy arrays (None or NaN: null)."""

    @staticmethod
    def lit(x: Any) -> Any:
        return x

    @staticmethod
    def _num(x: Any) -> Any:
        return np.nan if x is None else x

    def greatest(self, *xs: Any) -> Any:
        # fmax/fmin skip NaN as Spark's greatest/least skip null
        out = self._num(xs[0])
        for x in xs[1:]:
            out = np.fmax(out, self._num(x))
        return out

    def least(self, *xs: Any) -> Any:
        out = self._num(xs[0])
        for x in xs[1:]:
            out = np.fmin(out, self._num(x))
        return out

    def pow(self, base: Any, exponent: Any) -> Any:
        return np.power(np.asarray(self._num(base), dtype=float), self._num(exponent))

    def when(self, condition: Any, then: Any, otherwise: Any) -> Any:
        if not (_array(condition) or _array(then) or _array(otherwise)):
            return then if bool(condition) else otherwise  # scalars stay Python values (strings too)
        return np.where(condition, self._num(then), self._num(otherwise))

    def coalesce(self, *xs: Any) -> Any:
        out = xs[-1]
        for x in reversed(xs[:-1]):
            out = self.when(self.not_null(x), x, out)
        return out

    def is_null(self, x: Any) -> Any:
        if not _array(x):
            return _is_null_scalar(x if not isinstance(x, np.generic) else x.item())
        arr = x
        if arr.dtype.kind == "f":
            return np.isnan(arr)
        return np.array([_is_null_scalar(v) for v in arr.ravel()], dtype=bool).reshape(arr.shape)

    def not_null(self, x: Any) -> Any:
        return ~self.is_null(x) if _array(x) else not self.is_null(x)

    def neg(self, x: Any) -> Any:
        return None if not _array(x) and self.is_null(x) else -x

    def length(self, s: Any) -> Any:
        """Characters (code points) of a string, as Spark's length counts them."""
        return None if s is None else len(s)

    @staticmethod
    def endswith(s: str | None, suffix: str) -> bool:
        return s is not None and s.endswith(suffix)  # null: no, as a null condition is in a filter

    @staticmethod
    def startswith(s: str | None, prefix: str) -> bool:
        return s is not None and s.startswith(prefix)

    @staticmethod
    def xor(a: int, b: int) -> int:
        return a ^ b

    @staticmethod
    def bit_count(x: int) -> int:
        """Set bits of a signed 64-bit integer (its two's complement, as Spark's bit_count)."""
        return (x & 0xFFFF_FFFF_FFFF_FFFF).bit_count()

    @staticmethod
    def isin(x: Any, values: Iterable[Any]) -> Any:
        values = tuple(values)
        if not _array(x):
            return x in values
        return np.isin(np.asarray(x), values)

    def micros(self, epoch: Any) -> Any:
        """Epoch seconds as whole microseconds, rounded half away from zero (as
        jobs.engine.schemas.from_epoch_col stores them: Spark's round is HALF_UP); null stays null."""
        if not _array(epoch):
            if self.is_null(epoch):
                return math.nan  # compares False with anything, as a null does in a condition
            return epoch_micros(float(epoch))
        a = np.asarray(self._num(epoch), dtype=float) * 1e6
        return np.where(a >= 0, np.floor(a + 0.5), -np.floor(-a + 0.5))


NUMPY_OPS = NumpyOps()


@dataclass(frozen=True)
class By:
    """One level of an ordering: ``field`` ascending (nulls first) or descending (nulls last),
    Spark's defaults for ``asc()`` and ``desc()``."""
    field: str
    descending: bool = False


class _Reversed:
    """Wraps a value so that sorting puts larger values first (any comparable type)."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __lt__(self, other: "_Reversed") -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.value == other.value


def sort_key(order: tuple[By, ...]) -> Callable[[Mapping[str, Any]], tuple]:
    """The Python sort key of ``order`` over a row mapping: smaller sorts first, as Spark's
    ``orderBy(*jobs.engine.column_ops.spark_order(order))`` sorts."""
    fields = tuple((by.field, by.descending) for by in order)

    def key(row: Mapping[str, Any]) -> tuple:
        parts: list[Any] = []
        for name, descending in fields:
            value = row[name]
            if value is None or value != value:  # null (None or NaN)
                parts.append(_NULL_LAST if descending else _NULL_FIRST)
            elif not descending:
                parts.append((1, value))
            elif type(value) in (int, float):
                # numbers negated: a wrapper's Python comparisons cost ~10x as much when the
                # driver sorts its 10,000 due URLs
                parts.append((0, -value))
            else:
                parts.append((0, _Reversed(value)))
        return tuple(parts)
    return key


_NULL_FIRST = (0,)  # before every (1, value)
_NULL_LAST = (1,)   # after every (0, value)


def nulls_first_key(values: tuple) -> tuple:
    """The Python key of a Spark struct of ``values`` (as F.min(F.struct(...)) compares it:
    field by field, a null before any value)."""
    return tuple((0,) if _is_null_scalar(v) else (1, v) for v in values)
