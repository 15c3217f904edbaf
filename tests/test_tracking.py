"""Run tracking: the figures (crawl/tracking.py), the charts (crawl/charts.py), and through real
crawls (jobs/engine/tracking.py, jobs/crawl_cycles.py): the MLflow run in a real SQLite store read back with
MLflow's own client, the cycles Delta table, url_state.discovered_segment, tracking off, a broken
tracking store, and steps run by hand."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from crawl.crawldb.status import FetchStatus
from crawl.tracking import (MAX_PARAM_CHARS, StepFigures, config_params, cycle_metrics, cycle_row,
                            latency_percentiles, politeness_efficiency, store_name, tracking_store)
from tests.conftest import TRACKED, write_seeds

CONF = [arg for k, v in TRACKED.items() for arg in ("--conf", f"{k}={v}")]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- pure: where the store is ------------------------------------------------------------------

def test_default_store_is_sqlite_in_a_local_crawl_root(tmp_path):
    store = tracking_store(str(tmp_path / "crawl"), None, "", {})
    assert store.tracking_uri == f"sqlite:///{tmp_path}/crawl/mlflow.db"
    assert store.artifact_location == f"file://{tmp_path}/crawl/mlruns"
    relative = tracking_store("file://" + str(tmp_path / "c2"), None, "", {})
    assert relative.tracking_uri == f"sqlite:///{tmp_path}/c2/mlflow.db"


def test_object_store_root_gets_a_local_store_named_after_it(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": "/nonexistent"}
    store = tracking_store("s3a://bucket/crawls/news", None, "", env)
    folder = tmp_path / "data" / "deltacrawl" / "mlflow" / store_name("s3a://bucket/crawls/news")
    assert store.tracking_uri == f"sqlite:///{folder}/mlflow.db"
    assert store.artifact_location == f"file://{folder}/mlruns"
    assert store_name("s3a://bucket/crawls/news").startswith("s3a-bucket-crawls-news-")
    assert store_name("s3a://bucket/crawls/news") != store_name("s3a://bucket/crawls-news")
    home = tracking_store("s3a://b/c", None, "", {"HOME": str(tmp_path)})
    assert home.tracking_uri.startswith(f"sqlite:///{tmp_path}/.local/share/deltacrawl/mlflow/")


def test_store_precedence_and_off(tmp_path):
    env = {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}
    root = str(tmp_path / "crawl")
    assert tracking_store(root, None, "", env).tracking_uri == "http://127.0.0.1:5000"
    assert tracking_store(root, None, "", env).artifact_location is None  # the server decides
    assert tracking_store(root, None, "sqlite:///x.db", env).why == "mlflow.tracking_uri"
    cli = tracking_store(root, f"sqlite:///{tmp_path}/t/m.db", "sqlite:///x.db", env)
    assert (cli.why, cli.artifact_location) == ("--mlflow-uri", f"file://{tmp_path}/t/mlruns")
    assert tracking_store(root, "off", "sqlite:///x.db", env) is None
    assert tracking_store(root, None, "OFF", env) is None
    assert tracking_store(root, None, "", {"MLFLOW_TRACKING_URI": "off"}) is None


# --- pure: params and metrics ------------------------------------------------------------------

def test_config_params_every_key_cut_and_secrets_hidden():
    from crawl.config import build_config
    cfg = build_config(overrides={"s3.access_key_id": "AKIAEXAMPLE", "s3.secret_access_key": "hunter2",
                                  "fetch.host_overrides": json.dumps(
        [{"pattern": f"host{i}.example", "delay_s": 2.0} for i in range(40)])})
    params = config_params(cfg)
    assert set(params) == set(cfg)
    assert params["s3.secret_access_key"] == "(set)" and params["s3.session_token"] == ""
    assert "hunter2" not in json.dumps(params) and params["s3.access_key_id"] == "(set)"
    assert all(len(v) <= MAX_PARAM_CHARS for v in params.values())
    assert params["fetch.host_overrides"].endswith("(cut: see config.json)")
    assert params["fetch.delay_s"] == json.dumps(cfg["fetch.delay_s"])
    assert params["spark.master"] == cfg["spark.master"]


def fetch_figures(**kw):
    base = dict(step="fetch", started_at=0.0, seconds=10.0, segment_id="s", urls=30, hosts=3,
                by_outcome={"ok": 20, "robots_denied": 5, "network_error": 2, "not_attempted": 3},
                bytes=12345, politeness_bound_s=8.0, latency_ms={3: 10, 5: 10, 9: 2})
    base.update(kw)
    return StepFigures(**base)


def test_cycle_metrics():
    steps = [StepFigures("generate", 0.0, 2.0, "s", urls=30, hosts=3), fetch_figures(),
             StepFigures("dedup", 0.0, 1.0, "s", urls=20, duplicates=4),
             StepFigures("update", 0.0, 3.0, "s", urls=30, new_urls=7, hosts=3, crawldb_urls=50,
                         crawldb_by_status={"fetched": 20, "unfetched": 30})]
    m = cycle_metrics(steps)
    assert {f"fetch/outcome/{s}" for s in FetchStatus.ALL} <= set(m)  # zeros too: a point in every cycle
    assert m["fetch/outcome/ok"] == 20 and m["fetch/outcome/redirect"] == 0 and m["fetch/robots_denied"] == 5
    assert m["fetch/pages_per_s"] == pytest.approx(22 / 10.0)  # ok + network_error sent a request
    assert m["fetch/politeness_efficiency"] == pytest.approx(0.8)
    assert m["fetch/bytes"] == 12345 and m["generate/urls"] == 30 and m["dedup/duplicates"] == 4
    assert m["update/new_urls"] == 7 and m["crawldb/urls"] == 50 and m["crawldb/status/unfetched"] == 30
    assert m["seconds/cycle"] == pytest.approx(16.0) and m["seconds/fetch"] == 10.0
    # estimated inside their log2 buckets (32-64 ms and 512-1024 ms)
    assert m["fetch/latency_p50_ms"] == 34.3 and m["fetch/latency_p99_ms"] == 948.8


def test_hosts_with_a_robots_error_are_a_fetch_metric():
    from jobs.fetch import FetchResult
    from jobs.engine.tracking import result_figures
    result = FetchResult("s", 5, 2, {"ok": 3, "not_attempted": 2}, {"robots.txt unparsable": 1}, robots_errors=1)
    fig = result_figures("fetch", result, 0.0, 1.0)
    assert cycle_metrics([fig])["fetch/robots_errors"] == 1.0
    assert cycle_metrics([fetch_figures()])["fetch/robots_errors"] == 0.0  # a point in every cycle


def test_the_cycles_sitemap_problems_are_a_fetch_metric():
    from jobs.fetch import FetchResult
    from jobs.engine.tracking import result_figures
    result = FetchResult("s", 5, 2, {"ok": 5}, sitemap_errors=2)
    assert cycle_metrics([result_figures("fetch", result, 0.0, 1.0)])["fetch/sitemap_errors"] == 2.0
    assert "sitemap files refused or cut short: 2" in result.summary()
    assert cycle_metrics([fetch_figures()])["fetch/sitemap_errors"] == 0.0  # a point in every cycle


def test_politeness_efficiency_only_when_politeness_bound():
    assert politeness_efficiency(fetch_figures(politeness_bound_s=None)) is None
    assert politeness_efficiency(fetch_figures(politeness_bound_s=0.0)) is None
    assert "fetch/politeness_efficiency" not in cycle_metrics([fetch_figures(politeness_bound_s=None)])


def test_latency_percentiles_are_estimated_inside_their_bucket_not_its_edges():
    assert latency_percentiles({}) == {}
    assert latency_percentiles({0: 2}) == {"p50": 1.0, "p90": 1.8, "p99": 2.0}
    # 50 in 16-32 ms, 49 in 64-128 ms, 1 in 1024-2048 ms
    p = latency_percentiles({4: 50, 6: 49, 10: 1})
    assert p == {"p50": 32.0, "p90": 112.7, "p99": 128.0}
    assert 16 <= latency_percentiles({4: 10})["p50"] <= 32 and latency_percentiles({4: 10})["p50"] not in (16.0, 32.0)


def test_latency_histogram_keeps_empty_buckets():
    from crawl.tracking import latency_histogram
    assert latency_histogram({}) == []
    assert latency_histogram({2: 3, 5: 1}) == [("4-8", 3), ("8-16", 0), ("16-32", 0), ("32-64", 1)]


def test_a_new_store_keeps_the_default_experiments_artifacts_beside_it(tmp_path, monkeypatch):
    """MLflow's Default experiment would keep its artifacts in ./mlruns of the first step's working
    directory (for an Airflow task, a temporary folder that is deleted)."""
    from crawl.config import build_config
    from crawl.tracking import tracking_store
    from jobs.engine.tracking import CrawlTracker, OneLineWarnings
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    store = tracking_store(str(tmp_path / "crawl"), None, "", {})
    tracker = CrawlTracker(store, "deltacrawl", OneLineWarnings("deltacrawl crawl"))
    tracker.start("c1", build_config(), {})
    default = tracker.client.get_experiment("0")
    assert default.artifact_location.startswith(f"file://{tmp_path / 'crawl'}/mlruns"), default.artifact_location
    assert not (elsewhere / "mlruns").exists()


def test_cycle_row_has_every_column():
    from jobs.engine.schemas import CYCLES_SCHEMA
    row = cycle_row(fetch_figures(), "crawl-1", None, 2)
    assert set(row) == set(CYCLES_SCHEMA.fieldNames())
    assert (row["crawl_id"], row["cycle"], row["step"], row["by_outcome"]["ok"]) == ("crawl-1", 2, "fetch", 20)


def test_charts_are_png(tmp_path):
    from crawl.charts import render_all
    cycles = [(0, [StepFigures("inject", 0.0, 1.0, urls=3, new_urls=3)])]
    for c in (1, 2):
        cycles.append((c, [StepFigures("generate", 0.0, 1.0, "s", urls=3), fetch_figures(),
                           StepFigures("dedup", 0.0, 0.5, "s"),
                           StepFigures("update", 0.0, 2.0, "s", crawldb_by_status={"fetched": c, "unfetched": 9})]))
    paths = render_all(cycles, [("a.example", 9), ("b.example", 4)], str(tmp_path))
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["fetch_latency.png", "status_mix.png",
                                                          "step_seconds.png", "top_hosts.png"]
    assert all(open(p, "rb").read(8) == PNG_MAGIC for p in paths)
    # nothing fetched at all still draws (empty) charts
    assert len(render_all([(0, [StepFigures("inject", 0.0, 1.0)])], [], str(tmp_path / "empty"))) == 4


# --- real crawls -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def web():
    from crawl.devweb.web import DevWeb
    web = DevWeb(hosts=3, pages_per_host=6, port=0, seed=3, crawl_delay_s=0.4).start()
    yield web
    web.stop()


@pytest.fixture(scope="module")
def tracked(named_crawl):
    """The suite's shared crawl (tests/conftest.py, named_crawl): a `deltacrawl crawl` of several
    cycles with the default tracking store (TRACKED), started from a working directory of its own
    (nothing may appear there). Only read here: MLflow's store names the crawl root's own path."""
    from pathlib import Path

    from mlflow.tracking import MlflowClient
    root = named_crawl.root
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    experiment = client.get_experiment_by_name("deltacrawl")
    runs = client.search_runs([experiment.experiment_id])
    return SimpleNamespace(root=root, seeds=named_crawl.seeds, cycles=named_crawl.cycles, cwd=Path(named_crawl.cwd),
                           client=client, runs=runs, experiment=experiment, out=named_crawl.out, err=named_crawl.err)


def cycles_rows(spark, root):
    return [r.asDict() for r in spark.read.format("delta").load(f"{root}/cycles").collect()]


def test_crawl_is_an_mlflow_run_with_metrics_per_cycle(tracked):
    cycles = list(range(1, tracked.cycles + 1))
    assert len(tracked.runs) == 1 and len(cycles) >= 2
    run = tracked.runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == run.data.tags["deltacrawl.crawl_id"]
    assert run.data.tags["deltacrawl.cycles_run"] == str(tracked.cycles)
    client, run_id = tracked.client, run.info.run_id
    for name in ("generate/urls", "fetch/urls", "fetch/outcome/ok", "fetch/robots_denied", "fetch/bytes",
                 "fetch/pages_per_s", "dedup/duplicates", "update/new_urls", "crawldb/urls",
                 "seconds/generate", "seconds/fetch", "seconds/dedup", "seconds/update", "seconds/cycle"):
        assert [m.step for m in client.get_metric_history(run_id, name)] == cycles, name
    assert [m.step for m in client.get_metric_history(run_id, "inject/seeds")] == [0]
    fetched = {m.step: m.value for m in client.get_metric_history(run_id, "fetch/urls")}
    assert fetched[1] == len(tracked.seeds)
    assert client.get_metric_history(run_id, "fetch/bytes")[0].value > 0
    # politeness: the test web's hosts ask for a Crawl-delay, so some host waited between requests
    assert 0 < run.data.metrics["fetch/politeness_efficiency"] <= 1.0


def test_tracking_prints_nothing(tracked):
    """stdout and stderr carry deltacrawl's own output: no MLflow or alembic chatter in either."""
    assert "by status" in tracked.out and "mlflow" not in tracked.out.lower()
    assert "INFO mlflow" not in tracked.err and "alembic" not in tracked.err


def test_run_params_are_the_effective_config(tracked):
    from crawl.config import build_config
    params = tracked.runs[0].data.params
    cfg = build_config(overrides=TRACKED)
    assert set(params) == set(cfg)
    assert params["fetch.delay_s"] == "0.2" and params["spark.master"] == "local[2]"
    assert params["mlflow.experiment"] == "deltacrawl"


def test_run_artifacts_json_and_charts(tracked, spark, tmp_path):
    client, run_id = tracked.client, tracked.runs[0].info.run_id
    top = {a.path for a in client.list_artifacts(run_id)}
    assert {"stats.json", "cycles.json", "config.json", "charts"} <= top
    charts = {a.path for a in client.list_artifacts(run_id, "charts")}
    assert charts == {f"charts/{n}.png" for n in ("status_mix", "step_seconds", "fetch_latency", "top_hosts")}
    local = client.download_artifacts(run_id, "", str(tmp_path))
    stats = json.load(open(f"{local}/stats.json"))
    assert stats["total_urls"] == spark.read.format("delta").load(f"{tracked.root}/crawldb").count()
    for name in charts:
        assert open(f"{local}/{name}", "rb").read(8) == PNG_MAGIC
    # artifacts beside the store, in the crawl root; nothing in the working directory
    assert tracked.experiment.artifact_location == f"file://{tracked.root}/mlruns"
    assert list(tracked.cwd.iterdir()) == []


def test_cycles_table_rows_match_the_run(tracked, spark):
    run, cycles = tracked.runs[0], range(1, tracked.cycles + 1)
    rows = [r for r in cycles_rows(spark, tracked.root) if r["crawl_id"] == run.data.tags["deltacrawl.crawl_id"]]
    assert sorted((r["cycle"], r["step"]) for r in rows) == sorted(
        [(0, "inject")] + [(c, s) for c in cycles for s in ("generate", "fetch", "dedup", "update")])
    assert {r["mlflow_run_id"] for r in rows} == {run.info.run_id}
    by = {(r["cycle"], r["step"]): r for r in rows}
    assert by[(0, "inject")]["new_urls"] == len(tracked.seeds) and by[(0, "inject")]["segment_id"] is None
    for c in cycles:
        seg = by[(c, "generate")]["segment_id"]
        assert seg and all(by[(c, s)]["segment_id"] == seg for s in ("fetch", "dedup", "update"))
        fetch = by[(c, "fetch")]
        assert sum(fetch["by_outcome"].values()) == fetch["urls"] == by[(c, "generate")]["urls"]
        assert all(r["seconds"] > 0 and r["started_at"] is not None for r in (by[(c, s)] for s in
                                                                          ("generate", "fetch", "dedup", "update")))
    # the same figures as MLflow's (one source)
    history = {m.step: m.value for m in tracked.client.get_metric_history(run.info.run_id, "crawldb/urls")}
    assert history == {c: by[(c, "update")]["crawldb_urls"] for c in cycles}
    last = by[(tracked.cycles, "update")]
    assert last["crawldb_urls"] == sum(last["crawldb_by_status"].values())
    assert last["crawldb_urls"] == spark.read.format("delta").load(f"{tracked.root}/crawldb").count()


def test_url_rows_say_in_which_segment_they_were_discovered(tracked, spark):
    rows = spark.read.format("delta").load(f"{tracked.root}/crawldb").collect()
    steps = [r for r in cycles_rows(spark, tracked.root) if r["step"] == "update" and r["crawl_id"] ==
             tracked.runs[0].data.tags["deltacrawl.crawl_id"]]
    segments = {r["cycle"]: r["segment_id"] for r in steps}
    seeds = set(tracked.seeds)
    assert all(r["discovered_segment"] is None for r in rows if r["url"] in seeds)
    found = {r["discovered_segment"] for r in rows if r["url"] not in seeds}
    assert found and found <= set(segments.values())
    new_in = {c: sum(1 for r in rows if r["discovered_segment"] == s) for c, s in segments.items()}
    assert new_in == {c: r["new_urls"] for r in steps for c in [r["cycle"]]}


@pytest.fixture(scope="module")
def by_hand(spark, web, tmp_path_factory):
    """inject, generate and fetch run one by one, and no update: the seed stays leased, so a
    crawl of this root afterwards finds nothing due and stops after generate (a cheap crawl)."""
    from jobs import cli
    base = tmp_path_factory.mktemp("by-hand")
    root = str(base / "crawl")
    seeds = write_seeds(base / "seeds.txt", web.seed_urls()[:1])
    assert cli.main(["inject", seeds, "--crawl-root", root, *CONF]) == 0
    import io
    from contextlib import redirect_stdout
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["generate", "--crawl-root", root, *CONF]) == 0
    segment = out.getvalue().strip().splitlines()[-1]
    assert cli.main(["fetch", segment, "--crawl-root", root, *CONF]) == 0
    return SimpleNamespace(root=root, seeds=seeds, segment=segment, base=base,
                           rows=cycles_rows(spark, root))


def test_steps_run_by_hand_append_their_rows(by_hand, spark):
    rows = {r["step"]: r for r in by_hand.rows}
    assert set(rows) == {"inject", "generate", "fetch"}
    assert all(r["cycle"] is None and r["crawl_id"] is None and r["mlflow_run_id"] is None for r in rows.values())
    assert rows["inject"]["new_urls"] == 1
    assert rows["generate"]["urls"] == rows["fetch"]["urls"] == 1 and rows["fetch"]["segment_id"] == by_hand.segment
    assert rows["fetch"]["by_outcome"] == {"ok": 1} and rows["fetch"]["bytes"] > 0
    import os
    assert not os.path.exists(f"{by_hand.root}/mlflow.db")  # only `deltacrawl crawl` is an MLflow run


def rerun(by_hand, spark, capsys, mlflow_uri: str, cwd=None):
    """`deltacrawl crawl` on the by-hand root (nothing due: it stops after generate); returns
    (exit code, stdout, stderr, the rows it appended)."""
    import os
    from jobs import cli
    before = cycles_rows(spark, by_hand.root)
    capsys.readouterr()
    old = os.getcwd()
    os.chdir(cwd or old)
    try:
        rc = cli.main(["crawl", "--seeds", by_hand.seeds, "--cycles", "2", "--crawl-root", by_hand.root,
                       "--mlflow-uri", mlflow_uri, *CONF])
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    after = cycles_rows(spark, by_hand.root)
    key = lambda r: (str(r["crawl_id"]), r["cycle"] if r["cycle"] is not None else -1, r["step"])  # noqa: E731
    known = {str(b["crawl_id"]) for b in before}
    # earlier rows are never rewritten
    assert sorted(before, key=key) == sorted([r for r in after if str(r["crawl_id"]) in known], key=key)
    return rc, captured.out, captured.err, [r for r in after if str(r["crawl_id"]) not in known]


def test_tracking_off_writes_nothing_and_reruns_append_rows(by_hand, spark, capsys):
    cwd = by_hand.base / "cwd"
    cwd.mkdir()
    rc, out, err, new = rerun(by_hand, spark, capsys, "off", cwd)
    assert rc == 0, err
    assert "nothing due" in err and "mlflow" not in (out + err).lower()
    # the seed is still leased by the by-hand segment (fetched, never updated): stats says how to go on
    assert f"1 leased by segment {by_hand.segment} since " in out and f"'deltacrawl fetch {by_hand.segment}'" in out
    import os
    assert not os.path.exists(f"{by_hand.root}/mlflow.db") and not os.path.exists(f"{by_hand.root}/mlruns")
    assert list(cwd.iterdir()) == []
    # one new crawl id: inject as cycle 0, and cycle 1's generate that found nothing due
    assert len({r["crawl_id"] for r in new}) == 1 and {r["mlflow_run_id"] for r in new} == {None}
    assert sorted((r["cycle"], r["step"], r["urls"]) for r in new) == [(0, "inject", 1), (1, "generate", 0)]


def test_broken_tracking_store_does_not_fail_the_crawl(by_hand, spark, capsys):
    blocker = by_hand.base / "not-a-folder"
    blocker.write_text("a file where the store's folder should be\n")
    rc, out, err, new = rerun(by_hand, spark, capsys, f"sqlite:///{blocker}/mlflow.db")
    assert rc == 0, err
    lines = [line for line in err.splitlines() if "MLflow" in line]
    assert len(lines) == 1 and " crawl: MLflow tracking (" in lines[0] and "failed" in lines[0], err
    assert "Traceback" not in err
    assert "by status" in out  # the crawl ran to its end
    assert sorted((r["cycle"], r["step"]) for r in new) == [(0, "inject"), (1, "generate")]
    assert {r["mlflow_run_id"] for r in new} == {None}


def test_steps_given_a_crawl_id_make_one_mlflow_run(by_hand, spark, tmp_path, capsys):
    """What Airflow's DAG does (--crawl-id, --cycle): the first step creates the run, a failed step
    marks it FAILED, the next step marks it RUNNING and logs its metrics at step = cycle, and
    stats --crawl-id finishes it with the artifacts; the cycles rows carry the crawl id."""
    from mlflow.tracking import MlflowClient

    from jobs import cli
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_opts = ["--crawl-root", by_hand.root, "--mlflow-uri", uri, "--crawl-id", "dag/run:1", *CONF]
    client = MlflowClient(tracking_uri=uri)

    def the_run():
        runs = client.search_runs([client.get_experiment_by_name("deltacrawl").experiment_id])
        assert len(runs) == 1
        return runs[0]
    # bad options are refused before anything starts
    assert cli.main(["dedup", by_hand.segment, *run_opts]) == 2
    assert "--crawl-id needs --cycle N" in capsys.readouterr().err
    assert cli.main(["dedup", by_hand.segment, "--crawl-root", by_hand.root, "--crawl-id", "a'b", "--cycle", "1"]) == 2
    assert "invalid --crawl-id" in capsys.readouterr().err

    assert cli.main(["fetch", "20990101000000-abcdef", "--cycle", "1", *run_opts]) == 2  # no such segment
    assert the_run().info.status == "FAILED"
    assert cli.main(["dedup", by_hand.segment, "--cycle", "1", *run_opts]) == 0
    run = the_run()
    assert run.info.status == "RUNNING" and run.info.run_name == "dag/run:1"
    assert run.data.params["fetch.delay_s"] == str(TRACKED["fetch.delay_s"])
    assert [m.step for m in client.get_metric_history(run.info.run_id, "dedup/pages")] == [1]
    assert "seconds/cycle" not in run.data.metrics  # logged by update, from all of the cycle's rows
    assert cli.main(["stats", "--crawl-id", "dag/run:1", "--crawl-root", by_hand.root, "--mlflow-uri", uri,
                     *CONF]) == 0
    run = the_run()
    assert run.info.status == "FINISHED"
    assert {"stats.json", "cycles.json", "config.json", "charts"} <= {f.path for f in
                                                                     client.list_artifacts(run.info.run_id)}
    rows = [r for r in cycles_rows(spark, by_hand.root) if r["crawl_id"] == "dag/run:1"]
    assert [(r["step"], r["cycle"], r["mlflow_run_id"]) for r in rows] == [("dedup", 1, run.info.run_id)]


def test_crawl_bookkeeping_runs_behind_the_crawl_and_reads_what_the_step_left(spark, cfg, root, tmp_path):
    """The recorder's figure queries and cycles append run on a thread of their own while the crawl
    goes on: they still count the crawldb as update left it, label the append with its own cycle,
    and never take the step's write settings (nor give theirs to the step)."""
    import glob
    import threading
    from jobs import inject
    from jobs.engine.commit_info import USER_METADATA_CONF, set_crawl_cycle
    from jobs.engine.tracking import CrawlRecorder, OneLineWarnings
    from jobs.update import UpdateResult
    from jobs.engine.writes import commit_once
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]))
    crawldb = spark.read.format("delta").load(root.crawldb)
    as_update_left_it = {r["status"]: r["n"] for r in crawldb.groupBy("status").count().withColumnRenamed("count", "n").collect()}
    recorder = CrawlRecorder(spark, root, "crawl-x", None, OneLineWarnings("deltacrawl crawl"))
    gate = threading.Event()
    recorder._background(lambda session: gate.wait(120))  # busy: what follows queues behind it
    set_crawl_cycle(spark, "crawl-x", 1)
    try:
        recorder.run_step(1, "update", lambda: UpdateResult("seg-x", False, 2, 0, 1, 0))
        steps = recorder.end_cycle()
        assert [f.step for f in steps] == ["update"] and steps[0].crawldb_by_status is None  # not waited for
        # the crawl goes on: cycle 2 begins, a step writes with its idempotent-write pair, the crawldb grows
        set_crawl_cycle(spark, "crawl-x", 2)
        with commit_once(spark, "deltacrawl-update-seg-y"):
            crawldb.limit(1).write.format("delta").mode("append").save(root.crawldb)
            gate.set()
            recorder.close()
            assert spark.conf.get("spark.databricks.delta.write.txnAppId") == "deltacrawl-update-seg-y"
        assert json.loads(spark.conf.get(USER_METADATA_CONF))["cycle"] == 2
    finally:
        gate.set()
        recorder.close()
        set_crawl_cycle(spark, None, None)
    assert steps[0].crawldb_by_status == as_update_left_it and steps[0].crawldb_urls == 2
    history = spark.sql(f"DESCRIBE HISTORY delta.`{root.cycles}`").orderBy("version").collect()
    append = [r for r in history if r["operation"] == "WRITE"][-1]
    assert json.loads(append["userMetadata"]) == {"step": None, "segment": None, "cycle": 1, "crawl_id": "crawl-x"}
    rows = spark.read.format("delta").load(root.cycles).collect()
    assert [(r["crawl_id"], r["cycle"], r["step"], r["crawldb_urls"]) for r in rows] == [("crawl-x", 1, "update", 2)]
    log = "".join(open(f).read() for f in glob.glob(f"{root.cycles}/_delta_log/*.json"))
    assert '"txn"' not in log


def test_a_store_failing_mid_crawl_is_one_line_and_no_exception(tmp_path, capsys):
    """The store works at start, then every call fails: one stderr line, nothing raised."""
    from crawl.tracking import tracking_store
    from jobs.engine.tracking import CrawlTracker, OneLineWarnings
    from crawl.config import build_config
    store = tracking_store(str(tmp_path / "crawl"), None, "", {})
    tracker = CrawlTracker(store, "deltacrawl", OneLineWarnings("deltacrawl crawl"))
    tracker.start("c1", build_config(), {})
    assert tracker.active
    client, run_id = tracker.client, tracker.run_id

    def refuse(*args, **kwargs):
        raise OSError("disk full")
    tracker.client.log_batch = refuse
    tracker.client.log_text = refuse
    capsys.readouterr()
    for cycle in (1, 2):
        tracker.log_cycle(cycle, [fetch_figures()])
    tracker.finish([(1, [fetch_figures()])], {"top_hosts": []}, {})
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MLflow tracking" in err and "disk full" in err
    assert not tracker.active
    run = client.get_run(run_id)  # marked, best effort, as no longer tracked
    assert run.info.status == "FAILED" and "disk full" in run.data.tags["deltacrawl.tracking_error"]


def test_dns_and_tls_failures_and_queries_are_fetch_metrics():
    from jobs.fetch import FetchResult
    from jobs.engine.tracking import result_figures
    result = FetchResult("s", 5, 3, {"ok": 2, "dns_error": 1, "tls_error": 2}, dns_errors=1, tls_errors=1, dns_queries=6)
    assert "hosts failing DNS 1, TLS 1; DNS queries 6" in result.summary()
    m = cycle_metrics([result_figures("fetch", result, 0.0, 1.0)])
    assert (m["fetch/dns_errors"], m["fetch/tls_errors"], m["fetch/dns_queries"]) == (1.0, 1.0, 6.0)
    assert m["fetch/pages_per_s"] == 2.0  # neither a failed name nor a failed handshake sent a request


def test_the_fetch_row_counts_urls_by_content_type_also_in_a_cycles_table_made_before_the_column(spark, root):
    """cycles.by_content_type (issue 51): fetch's figures count the segment's answered URLs per
    media type (parameters and case dropped; a sniffed type as the fetcher recorded it); a crawl
    root whose cycles table was written without the column reads as before, and the next append
    adds it (older rows null)."""
    from datetime import datetime, timezone

    from pyspark.sql.types import StructType

    from jobs.engine.schemas import CYCLES_SCHEMA, FETCHED_SCHEMA
    from jobs.engine.tracking import append_cycle_rows, cycles_of_run, step_figures
    SEG = "20261201000100-bbbbbb"
    old_schema = StructType([f for f in CYCLES_SCHEMA.fields if f.name != "by_content_type"])
    old_row = tuple({"crawl_id": "old", "cycle": 1, "step": "fetch", "segment_id": "20261201000000-aaaaaa", "seconds": 1.0,
                     "started_at": datetime.fromtimestamp(1000.0, timezone.utc), "urls": 3}.get(n)
                    for n in old_schema.fieldNames())
    spark.createDataFrame([old_row], old_schema).write.format("delta").save(root.cycles)
    [(cycle, [fig])] = cycles_of_run(spark, root, "old")
    assert (cycle, fig.step, fig.urls, fig.by_content_type) == (1, "fetch", 3, None)

    def url_row(n: int, ctype: str | None) -> dict:
        return {"kind": "url", "host": "a.test", "host_bucket": 0, "segment_id": SEG,
                "url": f"http://a.test/{n}", "url_hash": n, "fetch_status": "ok" if ctype else "network_error",
                "content_type": ctype, "content_length": 10 if ctype else None, "elapsed_ms": 5}
    rows = [url_row(i, t) for i, t in enumerate(["text/html; charset=utf-8", "Text/HTML", "application/pdf",
                                                 "application/pdf", "application/pdf", "image/png", None])]
    rows.append({"kind": "host", "host": "a.test", "host_bucket": 0, "segment_id": SEG, "requests": 6})
    spark.createDataFrame([tuple(r.get(n) for n in FETCHED_SCHEMA.fieldNames()) for r in rows],
                          FETCHED_SCHEMA).write.parquet(root.fetched(SEG))
    result = SimpleNamespace(segment_id=SEG, urls=7, hosts=1, by_fetch_status={"ok": 6, "network_error": 1},
                             blocked={}, robots_errors=0, sitemap_errors=0, dns_errors=0, tls_errors=0, dns_queries=0)
    fig = step_figures(spark, root, "fetch", result, 2000.0, 1.5)
    assert fig.by_content_type == {"text/html": 2, "application/pdf": 3, "image/png": 1}
    assert fig.bytes == 60 and sum(fig.latency_ms.values()) == 7
    append_cycle_rows(spark, root, [cycle_row(fig, "new", None, 2)])
    table = spark.read.format("delta").load(root.cycles)
    assert "by_content_type" in table.columns
    got = {r["crawl_id"]: r["by_content_type"] for r in table.collect()}
    assert got == {"old": None, "new": {"text/html": 2, "application/pdf": 3, "image/png": 1}}
    [(_, [back])] = cycles_of_run(spark, root, "new")
    assert back.by_content_type == fig.by_content_type
    # the documented query (docs/crawldb.md): URLs by content type per cycle
    spark.read.format("delta").load(root.cycles).createOrReplaceTempView("cycles")
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parent.parent / "docs" / "crawldb.md").read_text(encoding="utf-8")
    [query] = [q for q in re.findall(r"```sql\n(.*?)```", doc, re.S) if "by_content_type" in q]
    answer = spark.sql(query).collect()
    assert [tuple(r) for r in answer] == [("new", 2, 7, 2, 3)]
