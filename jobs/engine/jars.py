"""The JVM jars deltacrawl adds to Spark: resolved from Maven Central once, then cached.

Two sets, each in its own folder under the cache (``spark.jars_dir``, default
~/.cache/deltacrawl/jars):

- **delta** (always): delta-spark and delta-storage, at the version of the installed delta-spark
  Python package, so the Python and JVM sides are always the same release.
- **s3** (when the crawl root is on object storage): hadoop-aws at the version of the Hadoop that
  pyspark bundles (read off pyspark's own ``hadoop-client-api`` jar: 3.5.0 for pyspark 4.2.0; a
  different version fails at run time with NoSuchMethodError), with what it needs at run time
  (the AWS SDK v2 bundle, ~650 MB, and two small jars), resolved transitively by Maven.

Resolution uses Maven (``mvn dependency:copy-dependencies`` on a generated pom; Maven's own
~/.m2 is reused); without Maven, Spark's own package resolution (``spark.jars.packages``) is
used instead. A set is cached once complete (a manifest lists its jars), and a file lock makes
concurrent first runs safe.

``deltacrawl jars [--s3]`` prints the cached jar paths, comma-separated, for ``spark-submit --jars``.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

SCALA_BINARY = "2.13"
MANIFEST = "jars.txt"


class JarResolutionError(RuntimeError):
    pass


def delta_coordinates() -> list[str]:
    """Maven coordinates of the Delta jars matching the installed delta-spark and pyspark."""
    delta_version = version("delta-spark")
    spark_minor = ".".join(version("pyspark").split(".")[:2])
    return [f"io.delta:delta-spark_{spark_minor}_{SCALA_BINARY}:{delta_version}",
            f"io.delta:delta-storage:{delta_version}"]


def pyspark_jars_dir() -> Path | None:
    """The jars pyspark ships (Spark's class path), or None without them."""
    spec = find_spec("pyspark")
    jars = Path(spec.origin).parent / "jars" if spec and spec.origin else None
    return jars if jars is not None and jars.is_dir() else None


def bundled_hadoop_version() -> str:
    """The Hadoop version pyspark ships (from its jars/hadoop-client-api-<version>.jar)."""
    jars = pyspark_jars_dir()
    if jars is not None:
        for jar in jars.glob("hadoop-client-api-*.jar"):
            match = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
            if match:
                return match.group(1)
    raise JarResolutionError("cannot tell which Hadoop version pyspark bundles (no jars/hadoop-client-api-*.jar)")


def s3_coordinates() -> list[str]:
    """hadoop-aws matching pyspark's Hadoop; its dependencies come transitively."""
    return [f"org.apache.hadoop:hadoop-aws:{bundled_hadoop_version()}"]


JAR_SETS = {"delta": delta_coordinates, "s3": s3_coordinates}


def default_jars_dir(configured: str = "") -> Path:
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("DELTACRAWL_JARS_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "deltacrawl" / "jars"


def _set_dir(jars_dir: Path, name: str) -> Path:
    # the delta set lives at the top of the cache, where earlier versions put it
    return jars_dir if name == "delta" else jars_dir / name


def _manifest_key(name: str) -> str:
    return " ".join(JAR_SETS[name]())


def cached_jars(jars_dir: Path, name: str = "delta") -> list[Path] | None:
    """The jars of set ``name`` if all of them are cached for the current coordinates, else None."""
    folder = _set_dir(jars_dir, name)
    if name == "delta":  # two known files, named after their coordinates
        paths = [folder / _jar_name(c) for c in delta_coordinates()]
    else:
        try:
            key, *names = (folder / MANIFEST).read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        if key != _manifest_key(name) or not names:
            return None
        paths = [folder / n for n in names]
    return paths if all(p.is_file() and p.stat().st_size > 0 for p in paths) else None


def _jar_name(coordinate: str) -> str:
    _group, artifact, ver = coordinate.split(":")
    return f"{artifact}-{ver}.jar"


def _pom(coordinates: list[str]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in (c.split(":") for c in coordinates))
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            '<groupId>deltacrawl</groupId><artifactId>jars</artifactId><version>1</version>'
            f'<dependencies>{deps}</dependencies></project>')


def _run_mvn(cmd: list[str], what: str, cwd: str | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise JarResolutionError(f"could not fetch {what} from Maven Central: {' '.join(tail)}")


def _fetch_set(mvn: str, name: str, folder: Path, staging: str) -> None:
    coordinates = JAR_SETS[name]()
    if name == "delta":  # exactly these two jars; Spark provides everything they depend on
        for coordinate in coordinates:
            _run_mvn([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={coordinate}",
                      f"-DoutputDirectory={staging}"], coordinate)
        for coordinate in coordinates:
            os.replace(Path(staging) / _jar_name(coordinate), folder / _jar_name(coordinate))
        return
    # transitively, run-time scope: Hadoop itself is "provided" (pyspark bundles it)
    Path(staging, "pom.xml").write_text(_pom(coordinates), encoding="utf-8")
    out = Path(staging) / "out"
    _run_mvn([mvn, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
              f"-DoutputDirectory={out}"], ", ".join(coordinates), cwd=staging)
    names = sorted(p.name for p in out.glob("*.jar"))
    if not names:
        raise JarResolutionError(f"Maven resolved no jars for {', '.join(coordinates)}")
    for n in names:
        os.replace(out / n, folder / n)
    (folder / MANIFEST).write_text("\n".join([_manifest_key(name), *names]) + "\n", encoding="utf-8")


def ensure_jars(jars_dir: Path, name: str = "delta") -> list[Path] | None:
    """Return the cached jar paths of set ``name``, fetching them with Maven on first use.

    Returns None when Maven is not installed: the caller then falls back to
    ``spark.jars.packages`` with ``JAR_SETS[name]()``.
    """
    found = cached_jars(jars_dir, name)
    if found:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        return None
    folder = _set_dir(jars_dir, name)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached_jars(jars_dir, name)
        if found:
            return found
        with tempfile.TemporaryDirectory(dir=folder) as staging:
            _fetch_set(mvn, name, folder, staging)
    return cached_jars(jars_dir, name)


def ensure_delta_jars(jars_dir: Path) -> list[Path] | None:
    return ensure_jars(jars_dir, "delta")
