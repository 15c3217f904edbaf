"""Bad input through the real command line: one clear line on stderr, non-zero exit, crawldb unchanged."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from delta.tables import DeltaTable

from jobs import cli
from tests.conftest import FAST, write_seeds

CONF = [arg for k, v in FAST.items() for arg in ("--conf", f"{k}={v}")]


@pytest.fixture(scope="module")
def seeded_template(spark, tmp_path_factory):
    """Two seeds injected with a relative seeds file and crawl root, from the folder that holds
    them (test_relative_crawl_root checks where the tables went): one inject serves both."""
    base = tmp_path_factory.mktemp("seeded")
    write_seeds(base / "good.txt", ["http://a.example/", "http://b.example/"])
    cwd = os.getcwd()
    os.chdir(base)
    try:
        rc = cli.main(["inject", "good.txt", "--crawl-root", "./crawl", *CONF])
    finally:
        os.chdir(cwd)
    assert rc == 0
    return str(base / "crawl")


@pytest.fixture
def seeded_root(seeded_template, tmp_path):
    """A crawl root with two seeds injected: each test its own copy (a test may change it), made
    by copying one injected root rather than injecting again (a Spark job per test)."""
    root = tmp_path / "crawl"
    shutil.copytree(seeded_template, root)
    return str(root)


def crawldb_state(spark, root):
    dt = DeltaTable.forPath(spark, f"{root}/crawldb")
    return dt.history(1).collect()[0]["version"], sorted(map(str, dt.toDF().collect()))


def one_error_line(err: str, prog: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(prog)]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("case", ["missing", "empty", "malformed", "directory", "utf16"])
def test_bad_seeds_file(spark, seeded_root, tmp_path, capsys, case):
    path = tmp_path / "seeds.txt"
    if case == "empty":
        path.write_text("")
    elif case == "malformed":
        path.write_text("not a url\nhttp//missing-colon.com\nftp://x.example/\n\x00\x01binary\n")
    elif case == "directory":
        path.mkdir()
    elif case == "utf16":
        path.write_text("http://a.example/\n", encoding="utf-16")
    before = crawldb_state(spark, seeded_root)
    capsys.readouterr()
    rc = cli.main(["inject", str(path), "--crawl-root", seeded_root, *CONF])
    err = capsys.readouterr().err
    assert rc == 2
    line = one_error_line(err, "deltacrawl inject")
    assert {"missing": "not found", "empty": "no valid URL", "malformed": "no valid URL",
            "directory": "directory", "utf16": "is UTF-16 text"}[case] in line
    assert crawldb_state(spark, seeded_root) == before


def test_unknown_config_key(spark, seeded_root, capsys):
    before = crawldb_state(spark, seeded_root)
    rc = cli.main(["generate", "--crawl-root", seeded_root, "--conf", "generate.topn=5"])
    assert rc == 2
    assert "unknown config key 'generate.topn'" in one_error_line(capsys.readouterr().err, "deltacrawl generate")
    assert crawldb_state(spark, seeded_root) == before


def test_bad_config_value_and_file(spark, seeded_root, tmp_path, capsys):
    assert cli.main(["stats", "--crawl-root", seeded_root, "--conf", "stats.top_hosts=many"]) == 2
    assert "expects int" in one_error_line(capsys.readouterr().err, "deltacrawl stats")
    assert cli.main(["stats", "--crawl-root", seeded_root, "--conf-file", str(tmp_path / "nope.toml")]) == 2
    assert "config file not found" in one_error_line(capsys.readouterr().err, "deltacrawl stats")


def test_crawl_root_not_writable(spark, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    seeds = write_seeds(tmp_path / "good.txt", ["http://a.example/"])
    rc = cli.main(["inject", seeds, "--crawl-root", str(blocker / "crawl"), *CONF])
    assert rc == 2
    assert "is not writable" in one_error_line(capsys.readouterr().err, "deltacrawl inject")
    assert cli.main(["inject", seeds, "--crawl-root", str(blocker), *CONF]) == 2
    assert "not a directory" in one_error_line(capsys.readouterr().err, "deltacrawl inject")


def test_generate_exit_codes(spark, seeded_root, capsys):
    assert cli.main(["generate", "--crawl-root", seeded_root, *CONF]) == 0
    segment = capsys.readouterr().out.strip().splitlines()[-1]
    assert os.path.isdir(f"{seeded_root}/segments/{segment}/fetchlist")
    assert cli.main(["generate", "--crawl-root", seeded_root, *CONF]) == 99  # everything is leased: nothing due


def test_unknown_segment_and_command(spark, seeded_root, capsys):
    assert cli.main(["fetch", "20990101000000-abcdef", "--crawl-root", seeded_root, *CONF]) == 2
    assert "no segment" in one_error_line(capsys.readouterr().err, "deltacrawl fetch")
    assert cli.main(["update", "../../etc", "--crawl-root", seeded_root, *CONF]) == 2
    assert "invalid segment id" in one_error_line(capsys.readouterr().err, "deltacrawl update")
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


@pytest.mark.parametrize("argv, error", [
    (["update", "20261129120000-a1b2c3\n"], "invalid segment id '20261129120000-a1b2c3\\n'"),
    (["dedup", "20261129120000-a1b2c3", "--crawl-id", "run-1\n", "--cycle", "1"], "invalid --crawl-id 'run-1\\n'"),
])
def test_an_id_with_a_trailing_newline_is_refused_before_spark_starts(tmp_path, capsys, argv, error):
    # "$" matches before a trailing newline: the ids are checked with fullmatch (no JVM is started)
    assert cli.main([*argv, "--crawl-root", str(tmp_path)]) == 2
    assert error in one_error_line(capsys.readouterr().err, f"deltacrawl {argv[0]}")


@pytest.mark.parametrize("argv", [["stats"], ["generate"], ["fetch", "20261129120000-a1b2c3"], ["maintain", "--dry-run"],
                                  ["warc-get", "http://a.example/"], ["sql", "SELECT 1"]])
def test_a_missing_crawl_root_is_refused_and_left_missing(tmp_path, capsys, argv):
    root = tmp_path / "typo"
    assert cli.main([*argv, "--crawl-root", str(root)]) == 2  # before a JVM starts
    assert "no crawl root at" in one_error_line(capsys.readouterr().err, f"deltacrawl {argv[0]}")
    assert not root.exists()


def test_inject_refuses_bad_seeds_before_making_the_crawl_root(tmp_path, capsys):
    root = tmp_path / "new"
    assert cli.main(["inject", str(tmp_path / "no-seeds.txt"), "--crawl-root", str(root)]) == 2
    assert not root.exists()


def test_a_missing_object_store_crawl_root_is_refused_and_left_missing(moto_s3, monkeypatch, capsys):
    from tests.s3server import aws_environ, new_bucket
    for key, value in aws_environ(moto_s3).items():
        monkeypatch.setenv(key, value)
    bucket = new_bucket(moto_s3)
    assert cli.main(["stats", "--crawl-root", f"s3a://{bucket}/typo"]) == 2  # one ListObjectsV2, no JVM
    assert "no crawl root at s3a://" in one_error_line(capsys.readouterr().err, "deltacrawl stats")
    import boto3
    listing = boto3.client("s3", endpoint_url=moto_s3).list_objects_v2(Bucket=bucket)
    assert listing["KeyCount"] == 0


@pytest.mark.parametrize("statements", ["UPDATE hostdb SET url_count = 999", "SELECT 1; DELETE FROM crawldb"])
def test_sql_refuses_a_writing_statement_without_write(tmp_path, capsys, statements):
    # refused before a JVM starts (nothing runs, not even the SELECT before it); --write is the way
    assert cli.main(["sql", statements, "--crawl-root", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = one_error_line(captured.err, "deltacrawl sql")
    assert "may change the crawl root's tables" in line and "--write" in line


def test_global_options_before_the_command(spark, seeded_root, capsys):
    assert cli.main(["--crawl-root", seeded_root, "stats", *CONF]) == 0
    assert "total URLs" in capsys.readouterr().out


def test_installed_entry_point_reports_bad_config_without_traceback(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "deltacrawl")
    proc = subprocess.run([exe, "stats", "--crawl-root", str(tmp_path), "--conf", "nope=1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("deltacrawl stats: error: unknown config key 'nope' "
                                   "(every key is listed in conf/defaults.toml)")
    help_proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert help_proc.returncode == 0 and "deltacrawl inject SEEDS_FILE" in help_proc.stdout


def test_step_runs_under_spark_submit(spark, tmp_path):
    """Each step is also a standalone Spark application: spark-submit jobs/<step>.py ..."""
    from jobs.engine.jars import default_jars_dir, ensure_delta_jars
    from jobs.engine.session import QUICK_JIT
    bin_dir = os.path.dirname(sys.executable)
    jars = ",".join(str(p) for p in ensure_delta_jars(default_jars_dir()))
    seeds = write_seeds(tmp_path / "seeds.txt", ["http://a.example/", "junk"])
    root = tmp_path / "crawl"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobs", "inject.py")
    # the driver's JVM with the quick JIT compiler alone and the serial collector, as every JVM the
    # tests start for one step (tests/conftest.py FAST): 30.7 CPU s instead of 61.8 with the JVM's
    # defaults (2026-12-07). Its queries keep Spark's code generation: the users' way, which no
    # other test's JVM runs.
    java_options = " ".join([*QUICK_JIT, FAST["spark.jvm_options"]])
    proc = subprocess.run([os.path.join(bin_dir, "spark-submit"), "--master", "local[1]", "--jars", jars,
                           "--driver-java-options", java_options,
                           "--conf", "spark.ui.enabled=false", script, seeds, "--crawl-root", str(root),
                           # a named host: the operator names a contact (crawl/fetch/identity.py)
                           "--conf", f"fetch.user_agent={FAST['fetch.user_agent']}"],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # spark-submit runs the Python driver with its stderr merged into stdout (PythonRunner), so
    # our progress lines arrive on stdout here
    assert "1 new" in proc.stdout and "skipped line 2" in proc.stdout
    assert [r["url"] for r in spark.read.format("delta").load(str(root / "crawldb")).collect()] == ["http://a.example/"]


def test_relative_crawl_root(spark, seeded_template):
    # seeded_template injected into "./crawl" from its parent folder (exit 0 checked there)
    base = os.path.dirname(seeded_template)
    assert DeltaTable.isDeltaTable(spark, os.path.join(base, "crawl", "crawldb"))
    assert not os.path.exists(os.path.join(base, "spark-warehouse"))


def test_a_crawldb_folder_that_is_not_delta_is_bad_input(spark, tmp_path, capsys):
    root = tmp_path / "crawl"
    (root / "crawldb").mkdir(parents=True)
    (root / "crawldb" / "part-0000.csv").write_text("url\nhttp://a.example/\n")
    seeds = write_seeds(tmp_path / "seeds.txt", ["http://a.example/"])
    for argv, prog in ((["inject", seeds], "deltacrawl inject"), (["generate"], "deltacrawl generate"),
                       (["stats"], "deltacrawl stats")):
        assert cli.main([*argv, "--crawl-root", str(root), *CONF]) == 2, argv
        assert "crawldb exists but is not a Delta table" in one_error_line(capsys.readouterr().err, prog)
    assert sorted(os.listdir(root / "crawldb")) == ["part-0000.csv"]  # nothing written into it
    assert cli.main(["stats", "--crawl-root", str(root), "--conf", "spark.log_level=LOUD"]) == 2
    assert "'spark.log_level' must be one of" in one_error_line(capsys.readouterr().err, "deltacrawl stats")
