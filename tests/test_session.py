"""The SparkSession deltacrawl builds: settings that decide what a warm cycle costs."""
from __future__ import annotations


def _compilations(spark) -> int:
    """How many generated classes the JVM has compiled so far (Spark's codegen metrics)."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def test_the_session_keeps_the_configured_number_of_compiled_classes(spark, cfg):
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(cfg["spark.codegen_cache_entries"])
    assert cfg["spark.codegen_cache_entries"] > 100  # Spark's own default, too small for one cycle


def test_a_query_run_again_after_many_others_is_not_compiled_again(spark):
    """A warm cycle runs the same few hundred queries as the last one. With Spark's default of 100
    cached classes they evicted each other, and every cycle compiled all of them again."""
    def query(i: int) -> list:
        # a literal in an expression is part of the generated code: each i is another class
        return spark.range(4).selectExpr(f"id * {i} + 7 AS v").filter(f"v % {i + 2} >= 0").collect()

    from jobs.engine.writes import session_setting
    # the test session runs interpreted (tests/conftest.py): code generation on, as in a crawl
    with session_setting(spark, "spark.sql.codegen.wholeStage", "true"), \
            session_setting(spark, "spark.sql.codegen.factoryMode", "FALLBACK"):
        start = _compilations(spark)
        first = query(1)
        for i in range(2, 160):  # more distinct queries than Spark's default cache holds
            query(i)
        before = _compilations(spark)
        assert before - start >= 159  # each query compiled its own class
        assert query(1) == first
        assert _compilations(spark) == before
