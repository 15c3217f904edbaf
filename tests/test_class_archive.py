"""The driver JVM's class archive (jobs/engine/class_archive.py): a cold step maps the archive
built for this Java and Spark; off, a failed build or a build already under way mean no archive
and no waiting; a failed build is recorded once, not tried at every start. (A cold step mapping the
archive is checked in tests/test_logs.py, from the log file of the cold JVM it runs anyway.)"""
from __future__ import annotations

import fcntl
import os
import subprocess

from jobs.engine import class_archive
from jobs.engine.session import java_options
from tests.conftest import make_config



def test_the_driver_gets_the_archive_before_the_users_options_and_executors_never(tmp_path):
    cfg = make_config(spark__jit="full", spark__jvm_options="-XX:+UseParallelGC -Xshare:auto")
    archive = tmp_path / "spark-x.jsa"
    driver = java_options(cfg, "local[2]", archive)["spark.driver.extraJavaOptions"].split()
    assert driver[1:] == [f"-XX:SharedArchiveFile={archive}", "-Xlog:disable", "-Xlog:all=warning:stderr",
                          "-XX:+UseParallelGC", "-Xshare:auto"]
    on_cluster = java_options(cfg, "spark://127.0.0.1:7077", archive)
    assert on_cluster["spark.executor.extraJavaOptions"] == "-XX:+UseParallelGC -Xshare:auto"
    assert not any("SharedArchiveFile" in o for o in java_options(cfg, "local[2]")["spark.driver.extraJavaOptions"].split())


def test_off_failed_or_being_built_elsewhere_means_no_archive_and_no_wait(tmp_path, monkeypatch):
    def no_build(path):
        raise AssertionError("built")
    monkeypatch.setattr(class_archive, "_build", no_build)
    cfg = make_config(spark__class_archive_dir=str(tmp_path))
    assert class_archive.ensure_archive(make_config(spark__class_archive_dir=str(tmp_path),
                                                    spark__class_data_sharing=False)) is None
    path = class_archive.archive_path(cfg)
    assert path.parent == tmp_path and path.name.startswith("spark-") and path.suffix == ".jsa"
    with open(tmp_path / ".lock", "w") as lock:  # another process's first run holds the lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert class_archive.ensure_archive(cfg) is None
    path.with_suffix(".failed").write_text("")
    assert class_archive.ensure_archive(cfg) is None
    assert not path.exists()


def test_a_failed_build_is_recorded_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "_TRAINER", "jobs.engine.no_such_module")  # the child exits 1
    cfg = make_config(spark__class_archive_dir=str(tmp_path))
    assert class_archive.ensure_archive(cfg) is None
    path = class_archive.archive_path(cfg)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", path.with_suffix(".failed").name]


def test_building_an_archive_deletes_those_unused_for_a_month(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "_build", lambda path: path.write_bytes(b"archive") is not None)
    stale, recent = tmp_path / "spark-0000000000000000.jsa", tmp_path / "spark-1111111111111111.jsa"
    for old in (stale, recent):
        old.write_bytes(b"old")
    month = (class_archive.UNUSED_DAYS + 1) * 86400
    os.utime(stale, (stale.stat().st_atime - month, stale.stat().st_mtime - month))
    cfg = make_config(spark__class_archive_dir=str(tmp_path))
    built = class_archive.ensure_archive(cfg)
    assert built == class_archive.archive_path(cfg) and built.read_bytes() == b"archive"
    assert not stale.exists() and recent.exists()
    before = built.stat().st_mtime - month
    os.utime(built, (before, before))
    assert class_archive.ensure_archive(cfg) == built and built.stat().st_mtime > before  # used: touched


def test_an_archive_java_refuses_warns_on_stderr_and_the_result_stays_alone_on_stdout(tmp_path):
    """A class path installed again (same jars, new files) makes Java refuse the archive, with a
    warning that Java prints on stdout unless told otherwise; stdout carries the results. The key
    names the jars' modification times, so a reinstalled pyspark gets an archive of its own."""
    from crawl.config import build_config
    from jobs.engine import session
    archive = class_archive.ensure_archive(build_config())
    assert archive is not None
    from jobs.engine.jars import pyspark_jars_dir
    fake = tmp_path / "jars"
    fake.mkdir()
    for jar in sorted(os.listdir(pyspark_jars_dir()))[:3]:
        (fake / jar).write_bytes(b"")
    options = session.java_options(make_config(spark__jvm_options=""), "local[1]", archive)
    java_opts = options["spark.driver.extraJavaOptions"].split()[1:]
    proc = subprocess.run(["java", *java_opts, "-cp", f"{fake}/*", "-version"], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout == "" and "Unable to use shared archive" in proc.stderr, (proc.stdout, proc.stderr)
