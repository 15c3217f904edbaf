"""Output discipline (jobs/engine/logs.py): results on stdout, our progress lines on stderr, Spark's own
JVM output in a log file unless --verbose, and a failed command naming that file. The log file of a
cold step also shows its JVM mapping the class archive (jobs/engine/class_archive.py): one cold JVM
serves both checks."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from jobs.engine import logs
from tests.conftest import FAST, write_seeds

CONF = [arg for k, v in FAST.items() for arg in ("--conf", f"{k}={v}")]
DELTACRAWL = os.path.join(os.path.dirname(sys.executable), "deltacrawl")
LINE = re.compile(r"^\d\d:\d\d:\d\d (\w+): (.*)$")
# what the JVM says by itself on every start, and what log4j lines look like
JVM_NOISE = ("Using incubator modules", "log4j", " WARN ", " INFO ", "NativeCodeLoader")


def run_cli(args, state_home, timeout=600, conf=CONF):
    env = dict(os.environ, XDG_STATE_HOME=str(state_home))
    env.pop("DELTACRAWL_VERBOSE", None)
    return subprocess.run([DELTACRAWL, *args, *conf], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def cold_inject(tmp_path_factory):
    """`deltacrawl inject` in a cold JVM of its own, without --verbose, its JVM also logging which
    class archive it maps (-Xlog:cds=info: the JVM's own output, so into Spark's log file). The
    archive is that of the default configuration: make test builds it before the suite; built here
    if not."""
    from crawl.config import build_config
    from jobs.engine import class_archive
    archive = class_archive.ensure_archive(build_config())
    assert archive is not None and archive.exists()
    base = tmp_path_factory.mktemp("logs")
    seeds = write_seeds(base / "seeds.txt", ["http://a.example/", "not a url"])
    root, state = str(base / "crawl"), base / "state"
    conf = {**FAST, "spark.jvm_options": f"{FAST['spark.jvm_options']} -Xlog:cds=info"}
    inject = run_cli(["inject", seeds, "--crawl-root", root], state,
                     conf=[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")])
    return {"proc": inject, "seeds": seeds, "root": root, "state": state, "archive": archive}


def test_results_on_stdout_progress_on_stderr_spark_in_its_file(cold_inject):
    seeds, root, state, inject = (cold_inject[k] for k in ("seeds", "root", "state", "proc"))
    assert inject.returncode == 0, inject.stderr
    assert inject.stdout == ""  # inject has no machine-readable result
    lines = inject.stderr.strip().splitlines()
    assert all(LINE.match(line) for line in lines), inject.stderr  # only our own lines
    assert not any(noise in inject.stderr for noise in JVM_NOISE), inject.stderr
    said = [LINE.match(line).groups() for line in lines]
    assert ("inject", f"seeds {seeds}: started") in said
    assert any(step == "inject" and "skipped line 2" in text for step, text in said)
    assert any(step == "inject" and re.search(r"1 valid seeds, 1 new, .*\(\d+\.\d s\)$", text) for step, text in said)
    jvm_logs = list((state / "deltacrawl" / "logs").glob("*-inject-*.log"))
    assert len(jvm_logs) == 1 and "Using incubator modules" in jvm_logs[0].read_text()

    stats = run_cli(["stats", "--format", "json", "--crawl-root", root, "--verbose"], state)
    assert stats.returncode == 0, stats.stderr
    report = json.loads(stats.stdout)  # stdout is exactly one JSON object
    assert report["total_urls"] == 1 and report["by_status"] == [["unfetched", 1]]
    # --verbose: the JVM's own output stays on stderr (no log file), next to our lines
    assert "Using incubator modules" in stats.stderr
    assert re.search(r"^\d\d:\d\d:\d\d stats: 1 URLs on 1 hosts in the crawldb \(\d+\.\d s\)$", stats.stderr, re.M)
    assert not list((state / "deltacrawl" / "logs").glob("*-stats-*.log"))


def test_a_cold_step_maps_the_class_archive(cold_inject):
    """The archive is mapped by a step's own JVM: Java's class-data-sharing log in Spark's log file."""
    assert cold_inject["proc"].returncode == 0, cold_inject["proc"].stderr
    (log,) = (cold_inject["state"] / "deltacrawl" / "logs").glob("*-inject-*.log")
    text = log.read_text(errors="replace")
    assert f"Opened archive {cold_inject['archive']}." in text and "Mapped dynamic region" in text, text[:4000]


def test_a_failure_names_sparks_log(monkeypatch, capsys):
    from jobs.engine.runtime import run_main

    def body(args, cfg):
        monkeypatch.setitem(logs._state, "jvm_log", "/var/log/example.log")
        raise RuntimeError("boom")
    assert run_main("deltacrawl example", [], lambda parser: None, body, needs_root=False) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["deltacrawl example: failed: RuntimeError: boom",
                   "deltacrawl example: set DELTACRAWL_DEBUG=1 for the full traceback; "
                   "Spark's own log: /var/log/example.log"]


def test_old_jvm_logs_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setitem(logs._state, "verbose", False)
    monkeypatch.setitem(logs._state, "jvm_log", None)
    folder = tmp_path / "deltacrawl" / "logs"
    folder.mkdir(parents=True)
    for i in range(logs.KEEP_JVM_LOGS + 5):
        (folder / f"20260101-0000{i:02d}-fetch-1.log").write_text("old\n")
    handle = logs.open_jvm_log()
    handle.close()
    assert len(list(folder.glob("*.log"))) == logs.KEEP_JVM_LOGS
    assert logs.jvm_log_path() in {str(p) for p in folder.glob("*.log")}
    assert not (folder / "20260101-000000-fetch-1.log").exists()  # the oldest went first


def test_progress_lines_while_a_job_runs(spark, capsys):
    import time
    logs.setup("deltacrawl fetch")
    with logs.Progress(spark, "fetch", "segment S", every_s=0.3):
        spark.sparkContext.parallelize(range(2), 2).map(lambda x: time.sleep(3) or x).collect()
    err = capsys.readouterr().err
    assert re.search(r"^\d\d:\d\d:\d\d fetch: segment S: \d of 2 tasks done, \d running \(\d+ s\)$", err, re.M), err
    # the job group is cleared: later jobs are not counted as this one's
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


@pytest.mark.parametrize("argv, command, rest", [
    (["-v", "stats"], "stats", ["-v"]),
    (["--verbose", "--crawl-root", "/x", "fetch", "S"], "fetch", ["S", "--verbose", "--crawl-root", "/x"]),
])
def test_verbose_before_the_command(argv, command, rest):
    from jobs.cli import _split_command
    assert _split_command(argv) == (command, rest)
