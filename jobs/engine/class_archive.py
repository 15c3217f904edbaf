"""A class-data-sharing archive for the driver's JVM, so that a step's cold start costs less.

Every step run as its own process (an Airflow task, a CLI step, a test) starts a JVM that loads
and verifies some ten thousand classes of Spark, Scala and Hadoop before it does any work. Java's
dynamic AppCDS writes the classes a JVM loaded from its class path into an archive at exit
(``-XX:ArchiveClassesAtExit``); a later JVM maps that archive instead of parsing and verifying
them again (``-XX:SharedArchiveFile``). Measured on a cycle of six cold steps (docs/decisions.md
"Class data sharing"): 0.84x the wall and 0.85x the CPU on 2 cores, ~4 CPU s less per JVM.

One archive per Java and Spark class path, named by a key of both (the java binary, its
version, pyspark's version and its jars), in ``spark.class_archive_dir`` (default
~/.cache/deltacrawl/cds). The first JVM start without one builds it: a child process starts
Spark with Delta, writes, reads and merges a small Delta table and runs a Python task in a
temporary folder, and exits; its JVM writes the archive to a temporary name, which is renamed
into place only once that JVM has exited cleanly. A file lock serialises first runs; a process
that finds the lock taken carries on without the archive rather than wait. A build that fails
leaves ``spark-<key>.failed`` instead, and is not tried again until that file is deleted. Each
use touches the archive; building a new one deletes those unused for 30 days. A JVM whose class
path does not match the archive ignores it (``-Xshare:auto``, Java's default) and says so in
the Spark log. Only the driver: executors start on other machines, with their own class path.
Off with ``spark.class_data_sharing = false``, e.g. where the cache folder is read-only.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from crawl.config import Config
from jobs.engine.jars import pyspark_jars_dir

# set in the child that builds the archive: its own JVM must not look for (or build) one
_BUILDING = "DELTACRAWL_BUILDING_CLASS_ARCHIVE"
_TRAINER = "jobs.engine.class_archive_training"  # run as ``python -m _TRAINER PATH`` by _build


def default_dir(configured: str = "") -> Path:
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "deltacrawl" / "cds"


def java_binary() -> str | None:
    """The java that Spark starts ($JAVA_HOME/bin/java, else the one on PATH), links resolved."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    found = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    return os.path.realpath(found) if found else None


def archive_key() -> str | None:
    """What the archive depends on: the JVM (its binary and version) and Spark's class path
    (pyspark's version and its jars' names, sizes and modification times: Java checks all three
    and refuses an archive whose class path was installed again). None without java or pyspark."""
    java, jars = java_binary(), pyspark_jars_dir()
    if java is None or jars is None:
        return None
    try:
        java_version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    digest = hashlib.sha256()
    for part in (java, java_version, version("pyspark"), str(jars),
                 *sorted(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in jars.glob("*.jar"))):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def archive_path(cfg: Config) -> Path | None:
    key = archive_key()
    return None if key is None else default_dir(cfg.spark.class_archive_dir) / f"spark-{key}.jsa"


def ensure_archive(cfg: Config) -> Path | None:
    """The archive for this Java and Spark, built first if there is none; None when class data
    sharing is off, cannot be used here, or another process is building it right now."""
    if not cfg.spark.class_data_sharing or os.environ.get(_BUILDING):
        return None
    path = archive_path(cfg)
    if path is None:
        return None
    if path.exists():
        try:
            os.utime(path)  # in use: kept by _prune_unused
        except OSError:
            pass
        return path
    failed = path.with_suffix(".failed")
    if failed.exists():
        return None  # built once and failed: not tried again at every start (delete the file to retry)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.parent / ".lock", "w")
    except OSError:
        return None  # a read-only cache: go on without
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # another first run is building it: not worth waiting for
        if path.exists():
            return path
        _prune_unused(path.parent)
        logging.getLogger("deltacrawl").info(
            "building the JVM's class archive %s, once for this Java and Spark (a minute); "
            "spark.class_data_sharing = false turns it off", path)
        if _build(path):
            return path
        try:
            failed.write_text("the build of this class archive failed; delete this file to try again\n")
        except OSError:
            pass
        return None


UNUSED_DAYS = 30


def _prune_unused(folder: Path) -> None:
    """Archives of other Java or Spark versions (or of another virtual environment's) that no
    JVM has used for UNUSED_DAYS days are deleted when a new one is built, so upgrades do not
    pile up ~190 MB files."""
    cutoff = time.time() - UNUSED_DAYS * 86400
    for old in folder.glob("spark-*.jsa"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass


def _build(path: Path) -> bool:
    """Run the training child (``python -m jobs.engine.class_archive_training PATH``) and move its
    archive into place if it exited cleanly."""
    # in a folder of its own, removed afterwards: a JVM that outlives a failed child finds no
    # folder to write into, instead of leaving a partial archive in the cache
    work = tempfile.mkdtemp(prefix=".building-", dir=path.parent)
    partial = Path(work) / path.name
    env = {**os.environ, _BUILDING: "1"}
    try:
        done = subprocess.run([sys.executable, "-m", _TRAINER, str(partial)], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=1800)
        if done.returncode == 0 and partial.exists() and partial.stat().st_size > 0:
            os.replace(partial, path)
            return True
        logging.getLogger("deltacrawl").warning("could not build the JVM's class archive (exit %s): going on "
                                                "without it", done.returncode)
        return False
    except (OSError, subprocess.SubprocessError) as exc:
        logging.getLogger("deltacrawl").warning("could not build the JVM's class archive (%s): going on without it",
                                                exc)
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    # make test: the archive for the default configuration, built now if there is none
    from crawl.config import build_config
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(ensure_archive(build_config()) or "no class archive (spark.class_data_sharing, or see above)")
