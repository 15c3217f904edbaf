"""airflow_dags/deltacrawl_cycle.py with real Airflow, in its own virtual environment
(.venv-airflow, `make airflow`): driven by subprocess from here, with a throw-away AIRFLOW_HOME
and SQLite metadata database per test module.

- the DagBag loads without import errors and the graph, retries and params are as designed;
- a DAG run with a stand-in `deltacrawl` that records its arguments: the exact command lines
  (quoting, crawl id and cycle included), the segment id handed on by XCom, and "nothing due"
  (exit 99) skipping the rest of the run while stats still reports the cycle that ran;
- the overlapped shape (DELTACRAWL_DAG_OVERLAP=1): its graph (the crawldb writers one chain in the
  order of `crawl --overlap`, the fetches another), and its skips with a stand-in (nothing due
  while a segment is pending still updates it and generates again; nothing due at all stops);
- a bad input (exit 2) failing the run at once, without retries (stand-in);
  the stand-in runs go one after the other in one Airflow process (stand_in_runs), each with its
  own environment, and each test checks its own;
- two runs of the overlapped DAG by the LocalExecutor (tasks side by side, as under a scheduler)
  in one Airflow process: two cycles with a stand-in whose overlapped steps wait for each other,
  checked in Airflow's task start and end times (the steps overlapped, the chains held); and one
  cycle with the real `deltacrawl` over the bundled test web, checked in the crawldb, the cycles
  table and its one MLflow run (read with MLflow's client).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from jobs import inject
from jobs.engine.crawl_root import CrawlRoot
from tests.conftest import FAST, TRACKED, make_config, write_seeds
from tests.expected import reachable
from tests.politeness import assert_polite

REPO = Path(__file__).resolve().parent.parent
DAGS = REPO / "airflow_dags"
AIRFLOW_PY = REPO / ".venv-airflow" / "bin" / "python"
DAG_ID = "deltacrawl_cycle"
MAX_CYCLES = 3
DELTACRAWL = str(Path(sys.executable).parent / "deltacrawl")  # the crawler's venv, not Airflow's
MARK = "DELTACRAWL_AIRFLOW_TEST_MARK"  # in the environment of every process a DAG run starts

# Runs inside .venv-airflow: "graph DAGS_FOLDER" prints the DagBag as JSON; "run DAGS_FOLDER DAG_ID
# CONF_JSON" runs one DAG run with dag.test() (or one per conf of a JSON list, one after the other)
# and prints the outcome of each as JSON on a line "RESULT ...";
# "runs DAGS_FOLDER DAG_ID SPECS_JSON" runs several, one after the other, each with its own
# environment, and prints a line "RESULT ..." for each, with its name (or the error it ended with).
HARNESS = textwrap.dedent(r'''
    import copy, json, sys
    from pathlib import Path
    from airflow.dag_processing.dagbag import BundleDagBag

    def outcome(dr):
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        with create_session() as session:
            xcoms = session.scalars(XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id,
                                                       key="return_value")).all()
            xcom = {x.task_id: XComModel.deserialize_value(x) for x in xcoms}
            tis = dr.get_task_instances(session=session)
            tasks = {ti.task_id: getattr(ti.state, "value", ti.state) for ti in tis}
            times = {ti.task_id: [ti.start_date.timestamp(), ti.end_date.timestamp()] for ti in tis
                     if ti.start_date and ti.end_date}
        return {"state": getattr(dr.state, "value", dr.state), "tasks": tasks, "xcom": xcom, "times": times}

    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode == "runs":
        # one Airflow start-up for several DAG runs: each run's environment is set before its DAG
        # is parsed (the DAG file reads its settings at import; the DagBag imports it afresh) and
        # is the environment of its tasks, which dag.test() runs in this process
        import os, traceback
        base_env = dict(os.environ)
        for spec in json.loads(sys.argv[4]):
            os.environ.clear()
            os.environ.update({**base_env, **spec["env"]})
            try:
                bag = BundleDagBag(dag_folder=folder, bundle_path=folder)
                assert not bag.import_errors, bag.import_errors
                result = outcome(bag.dags[sys.argv[3]].test(run_conf=spec["conf"]))
            except Exception:
                result = {"error": traceback.format_exc()}
            print("RESULT " + json.dumps({"name": spec["name"], **result}), flush=True)
        sys.exit(0)
    bag = BundleDagBag(dag_folder=folder, bundle_path=folder)
    if mode == "graph":
        def task(t):
            return {"upstream": sorted(t.upstream_task_ids), "trigger_rule": str(t.trigger_rule.value),
                    "retries": t.retries, "retry_delay_s": t.retry_delay.total_seconds(),
                    "backoff": t.retry_exponential_backoff, "max_retry_delay_s": t.max_retry_delay.total_seconds(),
                    "skip_on_exit_code": sorted(t.skip_on_exit_code), "operator": type(t).__name__,
                    "pool": t.pool, "execution_timeout_s": t.execution_timeout.total_seconds(),
                    "do_xcom_push": t.do_xcom_push}
        def accepts(dag, name, value):
            try:
                copy.deepcopy(dag.params.get_param(name)).resolve(value)
                return True
            except Exception:
                return False
        roots = ["/data/crawl", "s3a://bucket/crawl", "relative/crawl", ""]
        print(json.dumps({
            "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
            "dags": {d.dag_id: {"max_active_runs": d.max_active_runs, "schedule": str(d.schedule),
                                "dagrun_timeout_s": d.dagrun_timeout.total_seconds(),
                                "doc_md": d.doc_md or "", "params": d.params.dump(),
                                "param_schemas": {k: d.params.get_param(k).schema for k in d.params},
                                "accepts_root": {r: accepts(d, "crawl_root", r) for r in roots},
                                "accepts_conf": {c: accepts(d, "conf", [c]) for c in ("a.b=1", "no-equals")},
                                "tasks": {t.task_id: task(t) for t in d.tasks}}
                     for d in bag.dags.values()}}))
        sys.exit(0)
    import os, subprocess, time, urllib.request
    dag = bag.dags[sys.argv[3]]
    assert not bag.import_errors, bag.import_errors
    api = os.environ.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL")
    if api:
        # executor mode: tasks run side by side in the LocalExecutor's workers, which reach the
        # metadata database through the execution API, as under a scheduler (dag.test alone runs
        # one task at a time)
        port = api.split(":")[-1].split("/")[0]
        api_server = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--apps",
                                       "execution", "--host", "127.0.0.1", "--port", port, "--workers", "1"],
                                      stdin=subprocess.DEVNULL)
        for _ in range(600):
            try:
                urllib.request.urlopen(api.rstrip("/") + "/health", timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        # LocalExecutor.end() sends one shutdown message per live worker and then joins them all;
        # now and then one worker never receives its message and end() waits for it forever
        # (seen here: the run finished, one worker sat idle for 15 minutes; upstream:
        # apache/airflow#45329, #67870; killing that worker let end() return). One extra message
        # per worker, sent first, lets every worker leave; those left over go with the queue.
        from airflow.executors.local_executor import LocalExecutor
        upstream_end = LocalExecutor.end

        def end(self):
            for _ in self.workers:
                self.activity_queue.put(None)
            upstream_end(self)
        LocalExecutor.end = end
    try:
        # one run conf, or a list of them: run one after the other with the same executor set-up
        confs = json.loads(sys.argv[4])
        for conf in confs if isinstance(confs, list) else [confs]:
            dr = dag.test(run_conf=conf, use_executor=bool(api))
            print("RESULT " + json.dumps(outcome(dr)), flush=True)
    finally:
        if api:
            api_server.terminate()
            api_server.wait()
''')


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The test's environment without the user's Airflow or DAG settings, plus a fresh Airflow home."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "DELTACRAWL_DAG_", "DELTACRAWL_BIN", "DELTACRAWL_CRAWL_ROOT"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db")
    env.update(extra)
    return env


def stop_marked(mark: str) -> None:
    """Kill every process whose environment carries this run's mark: the harness, and what its
    tasks started in sessions of their own (bash, deltacrawl, Spark's JVM and Python workers)."""
    needle = f"{MARK}={mark}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                marked = needle in fh.read().split(b"\0")
        except OSError:
            continue
        if marked:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def airflow_python(args: list[str], env: dict[str, str], log: Path, timeout: float) -> str:
    """Run python in Airflow's venv with output to ``log``; whatever it started is stopped
    afterwards, even on a timeout or a failure. Returns the output."""
    mark = uuid.uuid4().hex
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(AIRFLOW_PY), *args], env={**env, MARK: mark}, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log.parent,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            # the harness's own process group first: what it started there may have rewritten its
            # environment (setproctitle: the execution API server, found running after every run
            # until this), so the mark alone does not find it
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            stop_marked(mark)
            proc.wait()
    text = log.read_text(errors="replace")
    assert rc == 0, f"{args[:3]} ended with {rc} (timeout {timeout} s); log {log}:\n{text[-6000:]}"
    return text


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    if not AIRFLOW_PY.exists():
        pytest.fail("Airflow's virtual environment is missing: run `make airflow` (make test does)")
    home = tmp_path_factory.mktemp("airflow_home")
    env = clean_env(home)
    with open(home / "migrate.log", "wb") as out:
        subprocess.run([str(AIRFLOW_PY.parent / "airflow"), "db", "migrate"], env=env, stdout=out,
                       stderr=subprocess.STDOUT, check=True, timeout=600, cwd=home)
    return home


def dag_runs(home: Path, confs: list[dict], log: Path, timeout: float, **env: str) -> list[dict]:
    """Runs of the DAG, one per conf of ``confs``, one after the other in one Airflow process; the
    final state, task states, their start and end times and XComs of each."""
    text = airflow_python(["-c", HARNESS, "run", str(DAGS), DAG_ID, json.dumps(confs)],
                          clean_env(home, **{"DELTACRAWL_DAG_RETRIES": "0", **env}), log, timeout)
    results = [json.loads(line[len("RESULT "):]) for line in text.splitlines() if line.startswith("RESULT ")]
    assert len(results) == len(confs), f"{len(results)} results of {len(confs)} runs in {log}:\n{text[-6000:]}"
    return results


def cycle_tasks(cycle: int) -> list[str]:
    return [f"cycle_{cycle}.{step}" for step in ("generate", "fetch", "dedup", "update")]


def dag_graph(tmp_path, name: str, arguments: str, **env) -> dict:
    """The DagBag's view (HARNESS "graph") of a dags folder holding deltacrawl_cycle.py and a file
    of its own that builds the DAG ``<name>_crawl`` with crawl_cycle_dag(..., ``arguments``)."""
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(DAGS / "deltacrawl_cycle.py", folder)
    (folder / f"{name}_crawl.py").write_text(
        "# an Airflow DAG file\nfrom deltacrawl_cycle import crawl_cycle_dag\n"
        f"{name} = crawl_cycle_dag('{name}_crawl', {arguments})\n")
    text = airflow_python(["-c", HARNESS, "graph", str(folder)], clean_env(tmp_path, **env), tmp_path / "graph.log", 300)
    return json.loads(text.strip().splitlines()[-1])


def test_dagbag_loads_and_the_graph_is_as_designed(tmp_path):
    # a second crawl is a second DAG, built with the same factory in a file of its own
    bag = dag_graph(tmp_path, "news", "crawl_root='/data/news', schedule='@hourly', max_cycles=2")
    assert bag["import_errors"] == {}
    assert set(bag["dags"]) == {DAG_ID, "news_crawl"}
    dag = bag["dags"][DAG_ID]
    tasks = dag["tasks"]

    expected = {("inject", "cycle_1.generate"), ("cycle_3.update", "stats")}
    for c in range(1, MAX_CYCLES + 1):
        steps = cycle_tasks(c)
        expected |= set(zip(steps, steps[1:])) | {(steps[-1], "stats")}
        if c < MAX_CYCLES:
            expected.add((steps[-1], f"cycle_{c + 1}.generate"))
    assert {(up, t) for t, spec in tasks.items() for up in spec["upstream"]} == expected
    assert set(tasks) == {"inject", "stats"} | {t for c in range(1, MAX_CYCLES + 1) for t in cycle_tasks(c)}

    assert dag["max_active_runs"] == 1 and dag["schedule"] == "None" and dag["dagrun_timeout_s"] == 24 * 3600
    for task_id, spec in tasks.items():
        assert spec["operator"] == "StepOperator"
        assert (spec["retries"], spec["retry_delay_s"], spec["backoff"], spec["max_retry_delay_s"]) == (2, 60, 2.0, 1800)
        assert (spec["pool"], spec["execution_timeout_s"]) == ("default_pool", 3 * 3600)
        assert spec["do_xcom_push"] == task_id.endswith(".generate"), task_id  # only the segment id is a value
        skips = task_id == "inject" or task_id.endswith(".generate")
        assert spec["skip_on_exit_code"] == ([99] if skips else []), task_id
    assert tasks["cycle_1.generate"]["trigger_rule"] == "none_failed"  # runs after a skipped inject
    assert tasks["cycle_2.generate"]["trigger_rule"] == "all_success"   # a skip upstream skips it
    assert tasks["stats"]["trigger_rule"] == "none_failed"  # also after nothing due: it ends the MLflow run

    assert dag["params"] == {"crawl_root": None, "spark_master": "", "conf": [], "conf_file": None, "seeds": None,
                             "cycles": 1, "mlflow_uri": None, "deltacrawl_bin": None}
    assert dag["param_schemas"]["cycles"]["maximum"] == MAX_CYCLES
    # a relative root would be relative to the task's temporary working directory: refused at trigger time
    assert dag["accepts_root"] == {"/data/crawl": True, "s3a://bucket/crawl": True, "relative/crawl": False, "": False}
    assert dag["accepts_conf"] == {"a.b=1": True, "no-equals": False}
    for words in ("exits **99**", "skip_on_exit_code", "max_active_runs=1", "XCom", "exponential backoff",
                  "exits **2**", "DELTACRAWL_DAG_POOL", "step_timeout",
                  "DELTACRAWL_BIN", "--crawl-id", "MLflow run", "Overlapped cycles", "DELTACRAWL_DAG_OVERLAP",
                  "recent_contacts"):
        assert words in dag["doc_md"], words

    news = bag["dags"]["news_crawl"]
    assert news["params"]["crawl_root"] == "/data/news" and news["schedule"] != "None"
    assert news["param_schemas"]["cycles"]["maximum"] == 2 and "cycle_3.generate" not in news["tasks"]


def ancestors(edges: set[tuple[str, str]], task: str) -> set[str]:
    """Every task ``task`` waits for, directly or not."""
    up = {u for u, t in edges if t == task}
    return up.union(*(ancestors(edges, u) for u in up)) if up else set()


# the order in which `deltacrawl crawl --overlap` runs the crawldb writers (jobs/crawl_cycles.py _overlapping_cycles)
OVERLAP_WRITERS = ["inject", "cycle_1.generate", "cycle_2.generate", "cycle_1.dedup", "cycle_1.update",
                   "cycle_3.generate", "cycle_2.dedup", "cycle_2.update", "cycle_3.dedup", "cycle_3.update"]


def test_overlapped_graph_chains_the_writers_and_the_fetches(tmp_path):
    """crawl_cycle_dag(overlap=True): the crawldb writers form one chain in the order of
    `crawl --overlap`, so no two of them can run at once; each fetch waits for its generate and the
    fetch before (politeness across segments); dedup and update of a cycle are not ordered against
    the next cycle's fetch, so they run beside it."""
    bag = dag_graph(tmp_path, "shop", "crawl_root='/data/shop', overlap=True", DELTACRAWL_DAG_OVERLAP="1")
    assert bag["import_errors"] == {} and set(bag["dags"]) == {DAG_ID, "shop_crawl"}
    tasks = bag["dags"][DAG_ID]["tasks"]  # the env switch reshapes the default DAG, still one DAG
    edges = {(up, t) for t, spec in tasks.items() for up in spec["upstream"]}
    fetches = [f"cycle_{c}.fetch" for c in range(1, MAX_CYCLES + 1)]
    expected = set(zip(OVERLAP_WRITERS, OVERLAP_WRITERS[1:])) | set(zip(fetches, fetches[1:]))
    expected |= {(f"cycle_{c}.generate", f"cycle_{c}.fetch") for c in range(1, MAX_CYCLES + 1)}
    expected |= {(f"cycle_{c}.fetch", f"cycle_{c}.dedup") for c in range(1, MAX_CYCLES + 1)}
    expected |= {(f"cycle_{c}.update", "stats") for c in range(1, MAX_CYCLES + 1)}
    assert edges == expected

    # one chain: each writer waits for every writer before it (so two never run at once)
    for i, writer in enumerate(OVERLAP_WRITERS):
        assert set(OVERLAP_WRITERS[:i]) <= ancestors(edges, writer), writer
    for c in range(1, MAX_CYCLES):
        nxt = f"cycle_{c + 1}.fetch"
        assert f"cycle_{c}.fetch" in ancestors(edges, nxt)
        # what runs beside the next fetch: neither waits for the other
        for step in ("dedup", "update"):
            mine = f"cycle_{c}.{step}"
            assert mine not in ancestors(edges, nxt) and nxt not in ancestors(edges, mine), (mine, nxt)
        # generate c+1 beside fetch c
        gen = f"cycle_{c + 1}.generate"
        assert f"cycle_{c}.fetch" not in ancestors(edges, gen) and gen not in ancestors(edges, f"cycle_{c}.fetch")

    for task_id, spec in tasks.items():
        # a skip upstream must not skip a step that still has work: each step skips itself (99)
        # when its cycle has no segment
        assert spec["trigger_rule"] == ("all_success" if task_id == "inject" else "none_failed"), task_id
        assert spec["skip_on_exit_code"] == ([] if task_id == "stats" else [99]), task_id
        assert spec["do_xcom_push"] == task_id.endswith(".generate"), task_id

    shop = bag["dags"]["shop_crawl"]["tasks"]  # the factory's argument builds the same shape
    assert {(up, t) for t, spec in shop.items() for up in spec["upstream"]} == expected


STAND_IN = '''#!{python}
"""A stand-in for deltacrawl: records its argv; generate hands out a segment, then finds nothing due."""
import json, os, sys
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
with open(calls, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "generate":
    n = sum(1 for line in open(calls) if json.loads(line)[0] == "generate")
    if n > 1:
        print("generate: nothing due")
        sys.exit(99)
    print("some progress on stderr", file=sys.stderr)
    print("generate: segment 20260101000000-abcdef: 3 URLs from 1 hosts")
    print("20260101000000-abcdef")
'''


def write_stand_in(tmp_path: Path, script: str) -> tuple[Path, Path]:
    """A stand-in `deltacrawl` (in a folder with a space in its name); returns (its folder, itself)."""
    bin_dir = tmp_path / "stand in"
    bin_dir.mkdir()
    stand_in = bin_dir / "deltacrawl"
    stand_in.write_text(script.format(python=sys.executable))
    stand_in.chmod(0o755)
    return bin_dir, stand_in


# the in-turn run's arguments, quoting to be kept: a quote and a space in the root, the seeds, the conf
ARGS_ROOT = "/crawls/it's here"
ARGS_CONF = ["fetch.delay_s=0.5", "fetch.user_agent=a b 'c' $HOME"]
ARGS_SEEDS = "/seeds/the news.txt"


def stand_in_scenarios() -> dict[str, tuple[str, dict, dict[str, str]]]:
    """Each stand-in DAG run: its stand-in script, run conf and DAG environment, by name."""
    overlap = {"DELTACRAWL_DAG_OVERLAP": "1"}
    return {
        "arguments": (STAND_IN, {"crawl_root": ARGS_ROOT, "cycles": 3, "conf": ARGS_CONF, "spark_master": "local[2]",
                                 "seeds": ARGS_SEEDS}, {}),
        "pending": (NOTHING_DUE_WHILE_PENDING, {"crawl_root": "/crawls/x", "cycles": 3}, overlap),
        "nothing_due": (NOTHING_DUE, {"crawl_root": "/crawls/x", "cycles": 3}, overlap),
        # with retries on (1 min, then 2 min of backoff): a retried exit 2 would call generate again
        "bad_input": (BAD_INPUT, {"crawl_root": "/crawls/typo", "cycles": 1}, {"DELTACRAWL_DAG_RETRIES": "2"}),
    }


@pytest.fixture(scope="module")
def stand_in_runs(airflow_home, tmp_path_factory):
    """Every stand-in scenario's DAG run, one after the other in ONE Airflow process (HARNESS
    "runs": Airflow and its in-process execution API start once for the four, not once each),
    each with its own stand-in and environment: by name, (the run's outcome, the stand-in's
    folder, which holds its calls.jsonl), and the harness's log."""
    base = tmp_path_factory.mktemp("stand_in_runs")
    specs, folders = [], {}
    for name, (script, conf, env) in stand_in_scenarios().items():
        (base / name).mkdir()
        folders[name], stand_in = write_stand_in(base / name, script)
        specs.append({"name": name, "conf": conf,
                      "env": {"DELTACRAWL_BIN": str(stand_in), "DELTACRAWL_DAG_RETRIES": "0", **env}})
    log = base / "runs.log"
    text = airflow_python(["-c", HARNESS, "runs", str(DAGS), DAG_ID, json.dumps(specs)], clean_env(airflow_home),
                          log, 600)
    results = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            results[result.pop("name")] = result
    return {name: (results.get(name), folders[name]) for name in folders}, log


def stand_in_run(stand_in_runs, name: str) -> tuple[dict, Path]:
    """One scenario's (outcome, stand-in folder) from stand_in_runs; a run that did not end is a failure."""
    runs, log = stand_in_runs
    run, bin_dir = runs[name]
    assert run is not None, f"no result for {name} in {log}:\n{log.read_text(errors='replace')[-6000:]}"
    assert "error" not in run, f"{name}: {run.get('error')}\nlog: {log}"
    return run, bin_dir


# the four stand-in runs share one Airflow process, started by whichever of their tests comes first
STAND_IN_TIMEOUT_S = 600


@pytest.mark.timeout(STAND_IN_TIMEOUT_S)
def test_dag_run_passes_arguments_and_segment_and_skips_when_nothing_due(stand_in_runs):
    run, bin_dir = stand_in_run(stand_in_runs, "arguments")
    root, conf, seeds = ARGS_ROOT, ARGS_CONF, ARGS_SEEDS

    tasks = run["tasks"]
    assert run["state"] == "success", tasks
    assert tasks["inject"] == "success"
    assert all(tasks[t] == "success" for t in cycle_tasks(1))
    assert all(tasks[t] == "skipped" for t in cycle_tasks(2) + cycle_tasks(3))  # nothing due in cycle 2
    assert tasks["stats"] == "success"                         # cycle 1 did update the crawldb
    assert run["xcom"] == {"cycle_1.generate": "20260101000000-abcdef"}  # no other task pushes its last line

    calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    # every step of the DAG run names it: one crawl id, "<dag_id>/<run_id>"
    crawl_id = calls[0][calls[0].index("--crawl-id") + 1]
    assert crawl_id.startswith(f"{DAG_ID}/") and len(crawl_id) > len(DAG_ID) + 1
    opts = ["--crawl-root", root, "--crawl-id", crawl_id, "--conf", "spark.master=local[2]", "--conf", conf[0],
            "--conf", conf[1]]
    seg = "20260101000000-abcdef"
    assert calls == [["inject", seeds, "--cycle", "0", *opts],
                     ["generate", "--cycle", "1", *opts], ["fetch", seg, "--cycle", "1", *opts],
                     ["dedup", seg, "--cycle", "1", *opts], ["update", seg, "--cycle", "1", *opts],
                     ["generate", "--cycle", "2", *opts], ["stats", *opts]]


NOTHING_DUE_WHILE_PENDING = '''#!{python}
"""A stand-in for deltacrawl: records its argv; generate hands out a segment, then finds nothing due
(the first segment still pending, as at the start of a crawl), then hands out a second one."""
import json, os, sys
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
with open(calls, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "generate":
    n = sum(1 for line in open(calls) if json.loads(line)[0] == "generate")
    if n == 2:
        print("generate: nothing due")
        sys.exit(99)
    print(f"segment-{{n}}")
'''


@pytest.mark.timeout(STAND_IN_TIMEOUT_S)
def test_overlapped_dag_run_updates_the_pending_segment_and_generates_again_when_nothing_due(stand_in_runs):
    """Overlapped shape, generate 2 finds nothing due while segment 1 is pending: segment 1 is still
    deduplicated and updated, and generate 3 runs after that update (as `crawl --overlap` generates
    again once its pending segment is updated); the empty cycle 2 skips itself without deltacrawl."""
    run, bin_dir = stand_in_run(stand_in_runs, "pending")
    tasks = run["tasks"]
    assert run["state"] == "success", tasks
    assert {t: tasks[t] for t in cycle_tasks(1) + cycle_tasks(3) + ["stats"]} == \
        {t: "success" for t in cycle_tasks(1) + cycle_tasks(3) + ["stats"]}
    assert all(tasks[t] == "skipped" for t in cycle_tasks(2))
    assert run["xcom"] == {"cycle_1.generate": "segment-1", "cycle_3.generate": "segment-3"}

    calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    steps = [(c[0], c[1] if c[1] != "--cycle" else c[2]) for c in calls]
    # the writers in crawl --overlap's order (the skipped cycle 2's dedup and update never ran)
    writers = [s for s in steps if s[0] in ("generate", "dedup", "update")]
    assert writers == [("generate", "1"), ("generate", "2"), ("dedup", "segment-1"), ("update", "segment-1"),
                       ("generate", "3"), ("dedup", "segment-3"), ("update", "segment-3")]
    assert steps.index(("fetch", "segment-1")) < steps.index(("dedup", "segment-1"))
    assert steps.index(("generate", "3")) < steps.index(("fetch", "segment-3"))
    assert steps[-1] == ("stats", "--crawl-root") and len(steps) == 10  # nothing else called deltacrawl


NOTHING_DUE = '''#!{python}
"""A stand-in for deltacrawl: records its argv; generate never finds anything due."""
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "generate":
    sys.exit(99)
'''


@pytest.mark.timeout(STAND_IN_TIMEOUT_S)
def test_overlapped_dag_run_stops_when_nothing_is_due_and_nothing_pending(stand_in_runs):
    """Overlapped shape: the later generates run on none_failed, but with no segment handed out by the
    two generates before them (nothing pending, nothing due) they skip without starting deltacrawl,
    as `crawl --overlap` stops; stats still ends the run."""
    run, bin_dir = stand_in_run(stand_in_runs, "nothing_due")
    assert run["state"] == "success", run["tasks"]
    assert {t for t, state in run["tasks"].items() if state != "skipped"} == {"stats"}
    calls = [json.loads(line)[:3] for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    assert calls == [["generate", "--cycle", "1"], ["stats", "--crawl-root", "/crawls/x"]]


def finished_mlflow_run(root: str, crawl_id: str) -> dict:
    """The MLflow run of a crawl id in the crawl root's default store, read with MLflow's client."""
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    experiment = client.get_experiment_by_name("deltacrawl")
    runs = client.search_runs([experiment.experiment_id], filter_string=f"tags.`deltacrawl.crawl_id` = '{crawl_id}'")
    assert len(runs) == 1, runs
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == crawl_id
    steps = {name: sorted(m.step for m in client.get_metric_history(run.info.run_id, name))
             for name in run.data.metrics}
    fetched = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "fetch/urls"))
    return {"run_id": run.info.run_id, "steps": steps, "params": run.data.params,
            "fetched_by_cycle": [value for _step, value in fetched],
            "artifacts": [f.path for f in client.list_artifacts(run.info.run_id)],
            "charts": [f.path.split("/")[-1] for f in client.list_artifacts(run.info.run_id, "charts")]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# A stand-in for the overlapped run's timing: two cycles whose steps must run side by side. Each
# call records its argv and start; the two steps of each pair that `crawl --overlap` runs at once
# (fetch 1 beside generate 2, fetch 2 beside dedup 1) each wait until the other has started, so a
# pair run one after the other makes the first one give up (exit 3) and the run fail.
OVERLAP_PAIRS = '''#!{python}
"""A stand-in for deltacrawl whose overlapped steps meet: generate hands out segment-1, then segment-2."""
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
step = sys.argv[1]
key = f"{{step}}-{{sys.argv[sys.argv.index('--cycle') + 1]}}" if "--cycle" in sys.argv else step
open(os.path.join(here, "started-" + key), "w").close()
partner = {{"fetch-1": "generate-2", "generate-2": "fetch-1", "fetch-2": "dedup-1", "dedup-1": "fetch-2"}}.get(key)
deadline = time.time() + 300
while partner and not os.path.exists(os.path.join(here, "started-" + partner)):
    if time.time() > deadline:
        print(f"{{key}}: {{partner}} never started beside it", file=sys.stderr)
        sys.exit(3)
    time.sleep(0.2)
time.sleep(1)  # both are running now: each ends at least a second after the other started
if step == "generate":
    print("segment-" + key.split("-")[1])
'''


# five cold JVMs, one at a time, and the stand-in's run: ~4 minutes with the suite's load on two cores
@pytest.mark.timeout(900)
def test_overlapped_dag_runs_steps_side_by_side_and_crawls_the_test_web(spark, airflow_home, tmp_path):
    """The overlapped shape (DELTACRAWL_DAG_OVERLAP=1) run by the LocalExecutor, so tasks really run
    side by side (each in a worker process, through the execution API, as under a scheduler), two
    DAG runs in one Airflow process:

    1. two cycles with a stand-in whose paired steps wait for each other (OVERLAP_PAIRS): generate 2
       runs while segment 1 is fetched and fetch 2 while segment 1 is deduplicated, so segment 2 is
       fetched before segment 1 is updated; checked also in Airflow's own task start and end times
       (order facts only, no durations), with the chains: no two crawldb writers at once, one fetch
       after the other.
    2. one cycle with the real `deltacrawl` (a cold JVM per task: generate to stats; the seeds are
       injected beforehand, in this process: the inject task's command line is the stand-in's
       above, its MLflow and cycles rows tests/test_tracking.py's) over the bundled test web:
       the segment id from generate to the other steps through XCom, the crawl root (every seed
       fetched, what they link to added, no lease left), politeness from the web's log, the
       cycles table, the one MLflow run and each task JVM's JIT flags.

    Real JVMs side by side, their politeness across segments fetched back to back and their crash
    safety: `crawl --overlap` in tests/test_crawl_overlap.py, whose steps are these tasks' code;
    generate's exit 99 itself: tests/test_cli.py."""
    from crawl.devweb.web import DevWeb

    bin_dir, stand_in = write_stand_in(tmp_path, OVERLAP_PAIRS)
    web = DevWeb(hosts=3, pages_per_host=4, port=0, seed=7, crawl_delay_s=0.4)
    web.start()
    try:
        root = str(tmp_path / "crawl")
        # the home pages and what they link to
        urls = sorted(u for u in reachable(web, web.seed_urls(), 2) if not web.is_disallowed(u))
        inject.run(spark, make_config(), CrawlRoot(root), write_seeds(tmp_path / "seeds.txt", urls))
        state = tmp_path / "state"
        # the JIT compiler as shipped (spark.jit "auto": each task runs one step, so the quick
        # compiler alone), which every task's JVM reports in its log (-XX:+PrintFlagsFinal, below).
        # Each task's queries run interpreted, as every test JVM's do (tests/conftest.py FAST).
        conf = {**{k: v for k, v in TRACKED.items() if k != "spark.jit"},
                "spark.jvm_options": f"{FAST['spark.jvm_options']} -XX:+PrintFlagsFinal".strip()}
        params = {"crawl_root": root, "spark_master": FAST["spark.master"], "deltacrawl_bin": DELTACRAWL,
                  "conf": [f"{k}={v}" for k, v in conf.items() if k != "spark.master"]}
        paired, run = dag_runs(
            airflow_home, [{"crawl_root": "/crawls/paired", "cycles": 2, "deltacrawl_bin": str(stand_in)},
                           {**params, "cycles": 1}],
            tmp_path / "runs.log", 3600, DELTACRAWL_DAG_OVERLAP="1", AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            XDG_STATE_HOME=str(state), AIRFLOW__CORE__PARALLELISM="4", AIRFLOW__API_AUTH__JWT_SECRET=uuid.uuid4().hex,
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{free_port()}/execution/")

        # 1. the steps overlapped: each pair met (its stand-ins waited for each other), and in
        # Airflow's records each of the two started before the other ended
        tasks = paired["tasks"]
        assert paired["state"] == "success", tasks
        ran = [*cycle_tasks(1), *cycle_tasks(2), "stats"]
        assert {t: tasks[t] for t in ran} == {t: "success" for t in ran}
        assert paired["xcom"] == {"cycle_1.generate": "segment-1", "cycle_2.generate": "segment-2"}
        start = {t: se[0] for t, se in paired["times"].items()}
        end = {t: se[1] for t, se in paired["times"].items()}
        for a, b in (("cycle_1.fetch", "cycle_2.generate"), ("cycle_2.fetch", "cycle_1.dedup")):
            assert start[a] < end[b] and start[b] < end[a], (a, b, paired["times"])
        assert start["cycle_2.fetch"] < end["cycle_1.update"]  # segment 2 was fetched before 1 was updated
        # ... and the chains held: no two writers at once, one fetch after the other
        writers = [t for t in OVERLAP_WRITERS if t in ran]
        for before, after in zip(writers, writers[1:]):
            assert end[before] <= start[after], (before, after, paired["times"])
        assert end["cycle_1.fetch"] <= start["cycle_2.fetch"]
        calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
        assert sorted(c[0] for c in calls) == sorted(["generate", "fetch", "dedup", "update"] * 2 + ["stats"])

        # 2. the real crawl
        tasks = run["tasks"]
        assert run["state"] == "success", tasks
        assert {t: tasks[t] for t in [*cycle_tasks(1), "stats"]} == {t: "success" for t in [*cycle_tasks(1), "stats"]}
        assert tasks["inject"] == "skipped"  # no seeds given
        assert all(tasks[t] == "skipped" for t in cycle_tasks(2) + cycle_tasks(3))  # not requested

        # the segment id went from generate to the other steps through XCom
        segment = run["xcom"]["cycle_1.generate"]
        assert os.listdir(f"{root}/segments") == [segment]
        assert os.path.exists(f"{root}/segments/{segment}/_updated")

        rows = {r["url"]: r for r in spark.read.format("delta").load(f"{root}/crawldb").collect()}
        fetched = {u for u, r in rows.items() if r["status"] == "fetched"}
        assert fetched == set(urls) and all(rows[u]["segment_id"] == segment for u in fetched)
        assert all(r["lease_until"] is None for r in rows.values())  # the lease released by update
        # what the seeds link to went in through the update
        assert {u for u, r in rows.items() if r["status"] in ("unfetched", "robots_denied")} == \
            reachable(web, urls, 2) - fetched
        assert_polite(web, web.requests(), float(FAST["fetch.delay_s"]))

        # the DAG run is one crawl run: its cycles rows, and one finished MLflow run with metrics per cycle
        cycles = [r.asDict() for r in spark.read.format("delta").load(f"{root}/cycles").collect()
                  if r["step"] != "inject"]
        crawl_ids = {r["crawl_id"] for r in cycles}
        assert len(crawl_ids) == 1 and next(iter(crawl_ids)).startswith(f"{DAG_ID}/")
        crawl_id = next(iter(crawl_ids))
        assert sorted((r["cycle"], r["step"]) for r in cycles) == [
            (1, s) for s in sorted(("generate", "fetch", "dedup", "update"))]
        mlflow_run = finished_mlflow_run(root, crawl_id)
        assert {r["mlflow_run_id"] for r in cycles} == {mlflow_run["run_id"]}
        assert mlflow_run["steps"]["fetch/urls"] == [1] and mlflow_run["steps"]["seconds/cycle"] == [1]
        assert mlflow_run["fetched_by_cycle"] == [len(fetched)]
        assert {"stats.json", "cycles.json", "config.json"} <= set(mlflow_run["artifacts"])
        assert {"status_mix.png", "step_seconds.png"} <= set(mlflow_run["charts"])
        assert mlflow_run["params"]["fetch.delay_s"] == str(FAST["fetch.delay_s"])
        assert mlflow_run["params"]["spark.jit"] == "auto"
        # every task's JVM ran with the quick compiler alone and the code cache at its tiered size
        jvm_logs = {step: list((state / "deltacrawl" / "logs").glob(f"*-{step}-*.log"))
                    for step in ("generate", "fetch", "dedup", "update", "stats")}
        assert {step: len(found) for step, found in jvm_logs.items()} == {
            "generate": 1, "fetch": 1, "dedup": 1, "update": 1, "stats": 1}
        for log in (log for found in jvm_logs.values() for log in found):
            text = log.read_text(errors="replace")
            assert re.search(r"TieredStopAtLevel\s+= 1\s.*\{command line\}", text), log
            assert re.search(r"ReservedCodeCacheSize\s+= 251658240\s.*\{command line\}", text), log

    finally:
        web.stop()


BAD_INPUT = '''#!{python}
"""A stand-in for deltacrawl whose generate finds its input bad (exit 2), as an unknown config key does."""
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "generate":
    print("deltacrawl generate: unknown config key 'fetch.dealy_s' (every key is listed in conf/defaults.toml)",
          file=sys.stderr)
    sys.exit(2)
'''


@pytest.mark.timeout(STAND_IN_TIMEOUT_S)
def test_bad_input_fails_at_once_without_retries(stand_in_runs):
    # run with retries on (stand_in_scenarios): a retried exit 2 would have called generate twice
    run, bin_dir = stand_in_run(stand_in_runs, "bad_input")
    assert run["state"] == "failed", run
    assert run["tasks"]["cycle_1.generate"] == "failed", run["tasks"]
    calls = [json.loads(line)[0] for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    assert calls == ["generate"]  # once: not retried
