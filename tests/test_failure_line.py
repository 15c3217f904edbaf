"""The one line a failed step prints says what failed, also when it failed inside a Spark task
or in the JVM (where the exception's own first line says neither)."""
from __future__ import annotations

import pytest

from jobs.engine.errors import describe_failure


def _raise_in_task(_):
    raise ConnectionError("WARC upload s3://bucket/key: cannot reach the S3 endpoint http://127.0.0.1:9")


def test_an_error_raised_in_a_python_task_is_named(spark):
    with pytest.raises(Exception) as info:
        spark.sparkContext.parallelize([1], 1).map(_raise_in_task).collect()
    assert describe_failure(info.value) == \
        "ConnectionError: WARC upload s3://bucket/key: cannot reach the S3 endpoint http://127.0.0.1:9"


def test_a_jvm_failure_is_named_by_its_innermost_cause(spark, tmp_path):
    with pytest.raises(Exception) as info:
        spark.read.parquet(str(tmp_path / "nothing-here")).collect()
    line = describe_failure(info.value)
    assert "nothing-here" in line and "\n" not in line


def test_a_plain_error_keeps_its_first_line():
    assert describe_failure(ValueError("first\nsecond")) == "ValueError: first"


class ConcurrentAppendException(Exception):
    """Named as Delta's (the Python classes Delta raises are matched by name, see jobs/engine/runtime.py)."""


def test_a_delta_commit_conflict_is_one_line_and_exit_3(capsys, monkeypatch):
    from jobs.engine.runtime import run_main
    from jobs.engine.errors import EXIT_FAILURE

    def body(_args, _cfg):
        raise ConcurrentAppendException("Files were added to partition [host_bucket=3] by a concurrent update."
                                        "\n\tat io.delta.Something(...)")

    monkeypatch.delenv("DELTACRAWL_DEBUG", raising=False)
    assert run_main("deltacrawl update", [], lambda parser: None, body, needs_root=False) == EXIT_FAILURE
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("deltacrawl update: failed: ConcurrentStepError: another step committed to the same "
                             "table first") and err[0].endswith("run update again")
    assert len(err) <= 2 and "io.delta" not in "\n".join(err)
