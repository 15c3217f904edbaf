"""SQL on a real crawl: deltacrawl sql / shell / history, commit info (step, cycle, segment) in
every Delta commit, the Change Data Feed, every SQL and Python example of docs/sql.md and of the
README's SQL section, the readers without Spark (DuckDB, polars, deltalake), and the analysis notebook.

One crawl serves the whole module, a copy of the suite's shared one (tests/conftest.py,
named_crawl: a crawl costs minutes on a loaded 2-core machine); the tests only read it, except the
CDF upgrade test, which uses its own crawl root.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.conftest import FAST, copy_named_crawl

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SQL_DOC = REPO / "docs" / "sql.md"
NOTEBOOK = REPO / "notebooks" / "crawl_analysis.ipynb"


@pytest.fixture(scope="module")
def crawled(spark, named_crawl, tmp_path_factory):
    """The shared crawl (3 cycles of the named test web, with the hosts that misbehave among the
    demo seeds, so the examples' questions about failures, traps and duplicates have answers),
    copied to <tmp>/crawl-data (the examples' relative path works from <tmp>); yields (root,
    CrawlResult) with the crawl's id and segments as its cycles table has them."""
    from jobs.crawl_cycles import CrawlResult
    from jobs.engine.crawl_root import CrawlRoot
    root = CrawlRoot(copy_named_crawl(named_crawl, tmp_path_factory.mktemp("sql")))
    generated = spark.read.format("delta").load(root.cycles).filter("step = 'generate'").collect()
    (crawl_id,) = {r["crawl_id"] for r in generated}
    segments = [r["segment_id"] for r in sorted(generated, key=lambda r: r["cycle"])]
    assert len(segments) == named_crawl.cycles >= 2 and all(segments)
    assert named_crawl.snapshots_built_ahead  # the snapshots dedup and update read were built during fetch
    yield root, CrawlResult(cycles_run=named_crawl.cycles, crawl_id=crawl_id, segments=segments)


@pytest.fixture
def registered(spark, crawled):
    from jobs.sql import register_tables
    root, result = crawled
    names = register_tables(spark, root)
    return root, result, names


def _sql(spark, text):
    from jobs.sql import run_statements
    return run_statements(spark, text)


# ---------------------------------------------------------------------------------------------
# commit info and history


def _commit_info(spark, path):
    return [(r["version"], r["operation"], json.loads(r["userMetadata"]) if r["userMetadata"] else None)
            for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]


def test_every_commit_says_step_cycle_and_segment(spark, crawled):
    root, result = crawled
    segment_of = {cycle: segment for cycle, segment in enumerate(result.segments, 1)}
    for path in (root.crawldb, root.hostdb):
        history = _commit_info(spark, path)
        assert all(info is not None for _, _, info in history), history
        for version, operation, info in history:
            assert set(info) == {"step", "segment", "cycle", "crawl_id"}
            assert info["crawl_id"] == result.crawl_id, (version, info)
            if info["step"] == "inject":
                assert info["cycle"] == 0 and info["segment"] is None
            else:
                assert info["step"] in ("generate", "update"), (version, operation, info)
                assert info["segment"] == segment_of[info["cycle"]], (version, info)
    steps = [(i["cycle"], i["step"]) for _, _, i in _commit_info(spark, root.crawldb)]
    assert steps[0] == (0, "inject") and (1, "generate") in steps and (2, "update") in steps
    # the cycles table: one append per cycle, made by the crawl's background bookkeeping (its own
    # session) while the next cycle ran, and labelled with the cycle it records, never with a step
    appends = [i for _, operation, i in _commit_info(spark, root.cycles) if operation == "WRITE"]
    assert [(i["cycle"], i["step"], i["crawl_id"]) for i in appends] == [
        (c, None, result.crawl_id) for c in range(result.cycles_run + 1)]
    # outside a step, commits carry no label of ours
    assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None


def test_crawldb_as_of_the_end_of_a_cycle_is_one_lookup(spark, registered):
    root, result, _ = registered
    end_of_cycle_1 = max(v for v, _, i in _commit_info(spark, root.crawldb) if i["cycle"] == 1)
    expected = spark.read.format("delta").option("versionAsOf", end_of_cycle_1).load(root.crawldb).count()
    columns, rows = _sql(spark, f"""
        SELECT count(*) FROM crawldb TIMESTAMP AS OF (
            SELECT max(timestamp) FROM crawldb_history WHERE cycle = 1 AND crawl_id = '{result.crawl_id}')""")
    assert rows == [[expected]]
    # and the state then is not the state now: cycle 2 discovered and fetched more
    assert expected < spark.read.format("delta").load(root.crawldb).count()


def test_history_of_a_url_newest_first_only_changes(spark, crawled):
    from jobs.sql import url_history
    root, result = crawled
    seg1 = result.segments[0]
    url = (spark.read.format("delta").load(root.crawldb)
           .filter("status = 'fetched' AND depth = 1").orderBy("url").first()["url"])
    entries = url_history(spark, root, url)
    versions = [e["version"] for e in entries]
    assert versions == sorted(versions, reverse=True) and len(versions) >= 3
    assert entries[-1]["status"] == "unfetched" and entries[-1]["step"] == "update"
    assert entries[-1]["commit_segment"] == seg1  # discovered by cycle 1's update
    assert entries[0]["status"] == "fetched"
    fetched = [e for e in entries if e["status"] == "fetched"][-1]  # the first entry that has it fetched
    assert fetched["step"] == "update" and fetched["cycle"] == 2  # fetched in cycle 2, a level further
    assert any(e["step"] == "generate" and e["lease_until"] is not None for e in entries)
    state = [{k: v for k, v in e.items() if k not in ("version", "timestamp", "operation", "step", "cycle",
                                                       "commit_segment")} for e in entries]
    assert all(a != b for a, b in zip(state, state[1:]))  # every line is a change
    assert url_history(spark, root, "http://127.0.0.1:1/not-crawled") == []


# ---------------------------------------------------------------------------------------------
# Change Data Feed


def test_change_data_feed_gives_a_downstream_indexer_the_changed_rows(spark, registered):
    root, result, _ = registered
    last, segment = result.cycles_run, result.segments[-1]
    for path in (root.crawldb, root.hostdb):
        props = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
        assert {r["key"]: r["value"] for r in props}.get("delta.enableChangeDataFeed") == "true"
    first_of_last_cycle = min(v for v, _, i in _commit_info(spark, root.crawldb) if i["cycle"] == last)
    columns, rows = _sql(spark, f"""
        SELECT _change_type, url FROM table_changes('crawldb', {first_of_last_cycle})
        WHERE _change_type IN ('insert', 'update_postimage', 'delete')""")
    inserted = {url for kind, url in rows if kind == "insert"}
    discovered = {r["url"] for r in spark.read.format("delta").load(root.crawldb)
                  .filter(f"discovered_segment = '{segment}'").select("url").collect()}
    assert inserted == discovered and inserted
    fetched = {r["url"] for r in spark.read.parquet(f"{root.fetched(segment)}/kind=url").collect()}
    assert fetched <= {url for kind, url in rows if kind == "update_postimage"}
    # the DataFrame form gives the same rows
    frame = (spark.read.format("delta").option("readChangeFeed", "true")
             .option("startingVersion", first_of_last_cycle).load(root.crawldb)
             .filter("_change_type != 'update_preimage'"))
    assert frame.count() == len(rows)


def test_change_data_feed_upgrade_of_an_older_crawl_root_is_idempotent(spark, tmp_path):
    from delta.tables import DeltaTable
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.schemas import HOST_STATE_SCHEMA, URL_STATE_SCHEMA
    from jobs.engine.tables import ensure_tables
    root = CrawlRoot(str(tmp_path / "old"))
    for path, schema in ((root.crawldb, URL_STATE_SCHEMA), (root.hostdb, HOST_STATE_SCHEMA)):
        DeltaTable.create(spark).location(path).addColumns(schema).partitionedBy("host_bucket").execute()
    ensure_tables(spark, root)
    ensure_tables(spark, root)
    for path in (root.crawldb, root.hostdb):
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        assert [r["operation"] for r in history].count("SET TBLPROPERTIES") == 1
        props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
        assert props["delta.enableChangeDataFeed"] == "true"


# ---------------------------------------------------------------------------------------------
# the commands


def test_sql_command_prints_table_csv_and_json(spark, crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    total = spark.read.format("delta").load(root.crawldb).count()
    query = "SELECT status, count(*) AS urls FROM crawldb GROUP BY status ORDER BY status"
    assert main(["sql", query, "--crawl-root", root.root]) == 0
    out = capfd.readouterr().out.splitlines()
    assert out[0].split() == ["status", "|", "urls"] and out[-1].endswith("rows)")
    assert main(["--crawl-root", root.root, "sql", "--format", "json", query]) == 0
    objects = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert sum(o["urls"] for o in objects) == total and all(set(o) == {"status", "urls"} for o in objects)
    assert main(["sql", "--format", "csv", "--crawl-root", root.root,
                 "DECLARE OR REPLACE VARIABLE wanted STRING DEFAULT 'fetched'; "
                 "SELECT count(*) AS n FROM crawldb WHERE status = wanted"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[0] == "n" and int(lines[1]) == spark.read.format("delta").load(root.crawldb).filter(
        "status = 'fetched'").count()


def test_sql_command_bad_sql_is_one_line_and_exit_2(crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    for bad in ("SELECT nope FROM crawldb", "SELECT * FROM no_such_table", "SELECT status FROM crawldb WHER x"):
        assert main(["sql", bad, "--crawl-root", root.root]) == 2
        captured = capfd.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("deltacrawl sql: error: ["), captured.err
    # a misspelt first word is refused before Spark parses it (it might have been a write): named as such
    assert main(["sql", "SELEC status FROM crawldb", "--crawl-root", root.root]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'SELEC' does not start a statement known to only read" in err[0] and "a typo?" in err[0]
    assert main(["sql", "SELECT 1", "--crawl-root", str(Path(root.root).parent / "missing")]) == 2


def test_sql_write_changes_the_table_in_a_commit_labelled_sql(spark, tmp_path, capfd):
    from jobs.cli import main
    path = str(tmp_path / "crawldb")
    spark.range(3).write.format("delta").save(path)  # any Delta table: register_tables needs a crawldb
    assert main(["sql", "--write", "UPDATE crawldb SET id = 7 WHERE id = 0", "--crawl-root", str(tmp_path)]) == 0
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [1, 2, 7]
    from delta.tables import DeltaTable
    assert json.loads(DeltaTable.forPath(spark, path).history(1).first()["userMetadata"])["step"] == "sql"
    capfd.readouterr()


def test_history_command(crawled, capfd):
    from jobs.cli import main
    root, _ = crawled
    assert main(["history", "http://127.0.0.1:1/not-crawled", "--crawl-root", root.root]) == 1
    capfd.readouterr()


def test_shell_has_spark_and_the_tables(crawled, monkeypatch, capfd):
    from jobs.cli import main
    root, _ = crawled
    monkeypatch.setattr("sys.stdin", io.StringIO(
        "print('urls:', spark.sql('SELECT count(*) FROM crawldb').first()[0])\n"))
    assert main(["shell", "--plain", "--crawl-root", root.root]) == 0
    out = capfd.readouterr()
    assert re.search(r"urls: \d+\n", out.out), out
    assert "crawldb, hostdb" in out.err  # the banner


def test_build_spark_refuses_a_session_without_delta():
    from jobs.engine.errors import UserError
    from jobs.engine.session import check_delta_session

    class Conf:
        def get(self, key, default=None):
            return default

    class NoDelta:
        conf = Conf()
    with pytest.raises(UserError, match="no Delta Lake"):
        check_delta_session(NoDelta())


# ---------------------------------------------------------------------------------------------
# the documented examples: docs/sql.md, and the taste of them in the README


def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def sql_examples() -> list[tuple[str, str]]:
    """(where, text) of every place that shows SQL or Python to run against a crawl."""
    return [("README.md, SQL section", readme_section("SQL on the crawl database")),
            ("docs/sql.md", SQL_DOC.read_text(encoding="utf-8"))]


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def test_documented_sql_examples_run_as_written(spark, registered, monkeypatch):
    from crawl.sqltext import split_statements
    from jobs.sql import run_statements
    root, _, _ = registered
    monkeypatch.chdir(Path(root.root).parent)
    examples = sql_examples()
    for where, text in examples:
        assert code_blocks(text, "sql"), f"no SQL example left in {where}"
    statements = [(where, s) for where, text in examples
                  for block in code_blocks(text, "sql") for s in split_statements(block)]
    assert len(statements) >= 10
    answers = {}
    for where, statement in statements:
        try:
            answers[statement] = run_statements(spark, statement)[1]
        except Exception as exc:  # noqa: BLE001 - say which example broke
            pytest.fail(f"{where} example fails: {statement}\n{exc}")
    # the demo web gives the questions about failures, traps and duplicates something to answer
    for words in ("WHERE held_back IS NOT NULL OR error IS NOT NULL", "WHERE u.held_back IS NOT NULL",
                  "WHERE url_budget IS NOT NULL"):
        asked = [s for _, s in statements if words in s]
        assert asked and all(answers[s] for s in asked), f"no rows for the documented {words!r} question"
    # and the Python ones (Spark, DuckDB, polars, deltalake), in order in one namespace, as a
    # reader pasting them into one session would
    blocks = [(where, number, block) for where, text in examples
              for number, block in enumerate(code_blocks(text, "python"), 1)]
    assert len(blocks) >= 4
    namespace: dict = {}
    for where, number, block in blocks:
        try:
            exec(compile(block, f"{where}, python example {number}", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{where} example fails:\n{block}\n{type(exc).__name__}: {exc}")


def test_documented_latest_crawl_is_the_newest_not_the_largest_id(spark):
    """A DAG run's id (``<dag_id>/scheduled__…``) sorts after every id of ``deltacrawl crawl`` (digits
    first), and a scheduled run makes one cycle: docs/sql.md's "latest crawl" must go by time, and
    "cycle 2 of the latest crawl" by the latest crawl that made a cycle 2."""
    from datetime import datetime
    section = SQL_DOC.read_text(encoding="utf-8")
    cycles_query = next(q for q in code_blocks(section, "sql") if "FROM cycles\nWHERE crawl_id" in q)
    history_query = next(q for q in code_blocks(section, "sql") if "cycle 2 of the latest crawl" in q)
    older_dag, newer_crawl, newest_dag = ("deltacrawl_cycle/scheduled__2026-01-01T00:00:00+00:00",
                                          "20260301000000-abcdef", "deltacrawl_cycle/manual__2026-04-01T00:00:00")
    rows = [(older_dag, 1, "fetch", datetime(2026, 1, 1)), (newer_crawl, 1, "fetch", datetime(2026, 3, 1)),
            (newer_crawl, 2, "fetch", datetime(2026, 3, 2))]
    cycles = spark.createDataFrame(rows, "crawl_id string, cycle int, step string, started_at timestamp")
    for column, kind in [("seconds", "double"), ("urls", "long"), ("new_urls", "long"), ("bytes", "long"),
                         ("crawldb_urls", "long"), ("by_outcome", "map<string,bigint>")]:
        cycles = cycles.withColumn(column, F.lit(None).cast(kind))
    cycles.createOrReplaceTempView("cycles")
    # the newest crawl of all is a one-cycle DAG run: "cycle 2" must come from the crawl before it
    rows.append((newest_dag, 1, "fetch", datetime(2026, 4, 1)))
    history = spark.createDataFrame([(v, c, crawl, t) for v, (crawl, c, _, t) in enumerate(rows)],
                                    "version long, cycle int, crawl_id string, timestamp timestamp")
    history.createOrReplaceTempView("crawldb_history")
    try:
        latest = {r["cycle"] for r in spark.sql(cycles_query.strip().rstrip(";")).collect()}
        assert latest == {1, 2}  # the newest crawl's cycles, not the largest id's (the older DAG run's)
        inner = re.search(r"TIMESTAMP AS OF \((.*?)\)\nGROUP BY", history_query, re.S).group(1)
        assert spark.sql(inner).first()[0] == datetime(2026, 3, 2)  # cycle 2 of the crawl that made one
    finally:
        spark.catalog.dropTempView("cycles")
        spark.catalog.dropTempView("crawldb_history")


# ---------------------------------------------------------------------------------------------
# without Spark


def test_readers_without_spark_see_what_spark_sees(spark, crawled):
    """Every table, after several MERGEs (deletion vectors in crawldb, hostdb, dedup_bands),
    through each documented reader: the same rows as Spark."""
    import polars as pl
    from crawl.readers import deltalake_query, duckdb_connect, polars_frames, table_paths
    root, _ = crawled
    paths = table_paths(root.root)
    assert {"crawldb", "hostdb", "warc_index", "dedup_pages", "dedup_bands"} <= set(paths)
    con = duckdb_connect(root.root)
    frames = polars_frames(root.root)
    for name, path in paths.items():
        want = spark.read.format("delta").load(path)
        key = "url" if "url" in want.columns else "host" if "host" in want.columns else want.columns[0]
        expected = sorted(str(r[0]) for r in want.select(key).collect())
        got = {
            "duckdb": sorted(str(r[0]) for r in con.execute(f"SELECT {key} FROM {name}").fetchall()),
            "polars": sorted(str(v) for v in frames[name].select(key).collect()[key].to_list()),
            "polars.read_delta": sorted(str(v) for v in pl.read_delta(path).get_column(key).to_list()),
            "deltalake": sorted(str(v) for v in deltalake_query(root.root, f"SELECT {key} FROM {name}")
                                .column(key).to_pylist()),
        }
        for reader, values in got.items():
            assert values == expected, f"{reader} reads {name} differently from Spark"
    assert len(frames["crawldb"].collect()) == spark.read.format("delta").load(root.crawldb).count()
    # the views deltacrawl sql adds: segments and the history of crawldb and hostdb, as Spark has them
    from jobs.sql import history_frame, segments_frame
    want = sorted((r["segment_id"], r["url"]) for r in segments_frame(spark, root).select("segment_id", "url").collect())
    assert sorted(con.execute("SELECT segment_id, url FROM segments").fetchall()) == want
    assert sorted(frames["segments"].select("segment_id", "url").collect().rows()) == want
    for view, path in (("crawldb_history", root.crawldb), ("hostdb_history", root.hostdb)):
        want = sorted((r["version"], r["step"], r["cycle"], r["segment"], r["crawl_id"])
                      for r in history_frame(spark, path).collect())
        columns = "version, step, cycle, segment, crawl_id"
        assert sorted(con.execute(f"SELECT {columns} FROM {view}").fetchall()) == want, view
        assert sorted(frames[view].select(columns.split(", ")).collect().rows()) == want, view
    # DuckDB time travel (docs/readers.md once said it could not)
    first = con.execute(f"SELECT count(*) FROM delta_scan('{root.crawldb}', version => 1)").fetchone()[0]
    assert first == spark.read.format("delta").option("versionAsOf", 1).load(root.crawldb).count()
    # deltalake's Change Data Feed and history (commit info) need no Spark either
    from deltalake import DeltaTable
    table = DeltaTable(root.crawldb)
    assert table.load_cdf(starting_version=1).read_all().num_rows > 0
    assert json.loads(table.history(1)[0]["userMetadata"])["step"] == "update"


# ---------------------------------------------------------------------------------------------
# the notebook


def test_analysis_notebook_runs_top_to_bottom(crawled, tmp_path, monkeypatch):
    """The headless command docs/sql.md gives (jupyter execute, in .venv), on a copy of the notebook
    (it runs in the notebook's folder): every cell runs, the chart is drawn."""
    import shutil
    import subprocess
    import sys

    import nbformat
    documented = re.search(r"^(\S*jupyter execute --output=\S+) notebooks/crawl_analysis.ipynb$",
                           (REPO / "docs" / "sql.md").read_text(encoding="utf-8"), re.M)
    assert documented, "docs/sql.md gives the headless command"
    root, _ = crawled
    conf = tmp_path / "notebook.toml"
    # the kernel's JVM is one more short-lived one: FAST's JIT compiler and options, as for the CLI's
    conf.write_text(f'[spark]\nmaster = "local[2]"\nshuffle_partitions = 2\njit = "{FAST["spark.jit"]}"\n'
                    f'jvm_options = "{FAST["spark.jvm_options"]}"\n',
                    encoding="utf-8")
    monkeypatch.setenv("DELTACRAWL_CRAWL_ROOT", root.root)
    monkeypatch.setenv("DELTACRAWL_CONF_FILE", str(conf))
    copy = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, copy)
    jupyter = str(Path(sys.executable).parent / "jupyter")
    # as documented, but this venv's jupyter and a copy; a cell error exits non-zero naming the cell
    done = subprocess.run([jupyter, "execute", f"--output={tmp_path / 'run'}", str(copy)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    notebook = nbformat.read(tmp_path / "run.ipynb", as_version=4)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the chart was not drawn"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "registered: crawldb, hostdb" in text
