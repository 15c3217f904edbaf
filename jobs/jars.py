"""Delta Lake's jars: resolved from Maven Central once, then cached.

The jar version follows the installed delta-spark Python package, so the Python and JVM sides
are always the same release. Resolution uses ``mvn dependency:copy`` into the cache folder
(reliable, and Maven's own ~/.m2 is reused); without Maven, Spark's own package resolution
(``spark.jars.packages``) is used instead. A file lock makes concurrent first runs safe.

``deltacrawl jars`` prints the cached jar paths, comma-separated, for ``spark-submit --jars``.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from importlib.metadata import version
from pathlib import Path

SCALA_BINARY = "2.13"


class JarResolutionError(RuntimeError):
    pass


def delta_coordinates() -> list[str]:
    """Maven coordinates of the Delta jars matching the installed delta-spark and pyspark."""
    delta_version = version("delta-spark")
    spark_minor = ".".join(version("pyspark").split(".")[:2])
    return [f"io.delta:delta-spark_{spark_minor}_{SCALA_BINARY}:{delta_version}",
            f"io.delta:delta-storage:{delta_version}"]


def default_jars_dir(configured: str = "") -> Path:
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("DELTACRAWL_JARS_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "deltacrawl" / "jars"


def _jar_name(coordinate: str) -> str:
    _group, artifact, ver = coordinate.split(":")
    return f"{artifact}-{ver}.jar"


def cached_jars(jars_dir: Path) -> list[Path] | None:
    paths = [jars_dir / _jar_name(c) for c in delta_coordinates()]
    return paths if all(p.is_file() and p.stat().st_size > 0 for p in paths) else None


def ensure_delta_jars(jars_dir: Path) -> list[Path] | None:
    """Return the cached jar paths, fetching them with Maven on first use.

    Returns None when Maven is not installed: the caller then falls back to
    ``spark.jars.packages``.
    """
    found = cached_jars(jars_dir)
    if found:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        return None
    jars_dir.mkdir(parents=True, exist_ok=True)
    with open(jars_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached_jars(jars_dir)
        if found:
            return found
        with tempfile.TemporaryDirectory(dir=jars_dir) as staging:
            for coordinate in delta_coordinates():
                cmd = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={coordinate}",
                       f"-DoutputDirectory={staging}"]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                    raise JarResolutionError(f"could not fetch {coordinate} from Maven Central: {' '.join(tail)}")
            for coordinate in delta_coordinates():
                name = _jar_name(coordinate)
                os.replace(Path(staging) / name, jars_dir / name)
    return cached_jars(jars_dir)
