"""package — what a Spark cluster's executors need to run deltacrawl's tasks.

Two artifacts, both built into a cache folder and reused while their content is unchanged:

- the **environment archive** (``deltacrawl-env-<key>.tar.gz``): the Python environment this
  command runs in — its site-packages with every dependency, and deltacrawl itself *installed*
  (crawl/, jobs/, conf/ with the compiled C modules), even when it is an editable install — for
  ``spark.archives`` / ``spark-submit --archives ...#deltacrawl_env``, used through
  ``spark.pyspark.python=./deltacrawl_env/bin/python``. ``bin/python`` stays a link to the base
  interpreter (as in any venv), so executors need the same Python (version and path) and nothing
  else. pyspark and py4j are left out: the Spark installation running the executors supplies its
  own, at its own version. So is every package the executors never import: only deltacrawl's
  own requirements and what they require in turn are packed, without the driver-only ones
  (``DRIVER_ONLY``: run tracking, charts, SQL scripts) and without the ``test`` and ``analysis``
  extras (pytest, moto, DuckDB, polars, Jupyter ...). The key hashes every packed file's path, size and mtime, and our
  code's bytes (not the ``__pycache__`` files that imports write as they go), so a changed
  dependency or a changed line of ours makes a new archive.
- the **code zip** (``deltacrawl-code-<key>.zip``): crawl/, jobs/ and conf/ as pure Python, for
  ``--py-files`` when the executors' Python already has the dependencies (the optional C modules
  cannot load from a zip: the pure-Python code runs instead, with the same results).

Why not venv-pack: its last release (0.2.0, 2018) refuses an environment with an editable install,
which is how ``make`` installs deltacrawl; packing a venv is a tar of two folders.

Exit:     0 done (prints the archive's path; --code prints the zip's) · 2 bad input · 3 failure.
Example:  spark-submit --archives "$(deltacrawl package)#deltacrawl_env" \\
              --conf spark.pyspark.python=./deltacrawl_env/bin/python ...
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path
from typing import Iterator

# The name the archive is unpacked under on each executor (the part after '#').
ENV_ALIAS = "deltacrawl_env"
EXECUTOR_PYTHON = f"./{ENV_ALIAS}/bin/python"
OUR_PACKAGES = ("crawl", "jobs", "conf")
# Supplied by the Spark installation that runs the executors (and 480 MB).
SPARK_SUPPLIED = ("pyspark", "py4j")
KEEP_ARCHIVES = 3
# deltacrawl's requirements that only the driver imports (jobs/engine/tracking.py, crawl/charts.py,
# crawl/sqltext.py): the executors' archive leaves them out, with whatever only they require.
DRIVER_ONLY = ("mlflow-skinny", "sqlalchemy", "alembic", "matplotlib", "sqlparse",
               # deltacrawl sql's embedded engine (crawl/sqlengine.py): ~290 MB no executor needs
               "duckdb", "duckdb-extension-delta", "duckdb-extension-httpfs", "deltalake")


def default_cache_dir() -> Path:
    env = os.environ.get("DELTACRAWL_PACKAGE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "deltacrawl" / "packages"


def _our_sources() -> dict[str, Path]:
    """Each of our packages' folder, wherever it is imported from (source tree or site-packages)."""
    import importlib
    return {name: Path(importlib.import_module(name).__path__[0]) for name in OUR_PACKAGES}


def _our_files(with_native: bool) -> Iterator[tuple[Path, str]]:
    """(file, name in the archive relative to site-packages) for our code."""
    for name, folder in _our_sources().items():
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.suffix == ".so" and not with_native:
                continue
            if path.suffix in (".py", ".toml", ".properties", ".so", ".pyi") or path.name == "py.typed":
                yield path, f"{name}/{path.relative_to(folder).as_posix()}"


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def stale_install() -> str | None:
    """Why deltacrawl's installed requirements may be out of date, or None: an editable install
    whose source tree's setup.py changed after it was installed (a ``git pull`` without ``make
    setup``) may require packages its recorded metadata does not name yet."""
    from importlib import metadata
    try:
        dist = metadata.distribution("deltacrawl")
    except metadata.PackageNotFoundError:
        return None
    recorded = getattr(dist, "_path", None)  # the .dist-info / .egg-info folder (a PathDistribution)
    setup = _our_sources()["crawl"].parent / "setup.py"
    try:
        if recorded is not None and setup.is_file() and setup.stat().st_mtime > Path(recorded).stat().st_mtime:
            return f"{setup} changed after deltacrawl was installed ({recorded})"
    except OSError:
        return None
    return None


def executor_distributions() -> set[str] | None:
    """The (normalised) names of the installed distributions the executors need: deltacrawl's
    requirements without extras, DRIVER_ONLY and Spark's own, and all they require in turn.
    None when deltacrawl is not installed (run from a source tree), or when its installed
    requirements may be stale (stale_install, with a warning): then everything is packed, so the
    executors never miss a dependency the code now imports."""
    from importlib import metadata
    from packaging.requirements import Requirement
    try:
        todo = list(metadata.requires("deltacrawl") or [])
    except metadata.PackageNotFoundError:
        return None
    stale = stale_install()
    if stale is not None:
        import logging
        logging.getLogger("deltacrawl.package").warning(
            "%s: packing every installed package for the executors; run `make setup` (or pip install -e .) "
            "to pack only what they need", stale)
        return None
    skip = {_normal(n) for n in (*DRIVER_ONLY, *SPARK_SUPPLIED)}
    needed: set[str] = set()
    while todo:
        req = Requirement(todo.pop())
        name = _normal(req.name)
        if name in needed or name in skip or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue  # an optional dependency that is not installed
        needed.add(name)
        todo += requires
    return needed


def _left_out_tops() -> set[str]:
    """Top-level names in site-packages that belong only to distributions the executors do not
    need (their packages, modules and .dist-info folders)."""
    from importlib import metadata
    needed = executor_distributions()
    if needed is None:
        return set()
    kept: set[str] = set()
    dropped: set[str] = set()
    for dist in metadata.distributions(path=[str(_site_packages())]):
        tops = {f.parts[0] for f in (dist.files or []) if f.parts and f.parts[0] != ".."}
        name = _normal(dist.metadata["Name"] or "")
        if name == "deltacrawl":
            continue
        (kept if name in needed else dropped).update(tops)
    return dropped - kept - {"__pycache__"}


def _is_ours_or_spark(rel: str, left_out: set[str] = frozenset()) -> bool:
    top = rel.split("/", 1)[0]
    base = top.split("-", 1)[0].lower()
    if top in SPARK_SUPPLIED or base in SPARK_SUPPLIED:
        return True  # pyspark/, py4j/, their .dist-info
    if top.startswith("__editable__") or top in OUR_PACKAGES:
        return True  # replaced by our installed copy
    return top in left_out  # never imported on an executor


def _env_files() -> Iterator[tuple[Path, str]]:
    """(file or link, name in the archive) for the environment, ours excluded."""
    prefix = Path(sys.prefix)
    site = _site_packages()
    site_rel = site.relative_to(prefix).as_posix()
    left_out = _left_out_tops()
    for entry in sorted((prefix / "bin").iterdir()):
        if entry.name.startswith("python"):
            yield entry, f"bin/{entry.name}"
    cfg = prefix / "pyvenv.cfg"
    if cfg.is_file():
        yield cfg, "pyvenv.cfg"
    for root, dirs, files in os.walk(site):
        rel_root = Path(root).relative_to(site).as_posix()
        rel_root = "" if rel_root == "." else rel_root + "/"
        # no __pycache__: other Python processes write (and rename) .pyc files there while this
        # runs, and executors compile what they import on their own
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not _is_ours_or_spark(rel_root + d, left_out))
        for f in sorted(files):
            rel = rel_root + f
            if not _is_ours_or_spark(rel, left_out):
                yield Path(root) / f, f"{site_rel}/{rel}"


def _key(entries: list[tuple[Path, str]], ours: list[tuple[Path, str]]) -> str:
    digest = hashlib.sha256(f"{sys.version}\n{sys.prefix}\n".encode())
    for path, name in entries:
        if "/__pycache__/" in name:
            continue  # written by imports as they happen; Python checks them against their source
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # removed since it was listed (a temporary file of another process)
        digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for path, name in ours:
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _in_venv() -> bool:
    return sys.prefix != sys.base_prefix


def _prune(cache: Path, pattern: str, keep: Path) -> None:
    old = sorted((p for p in cache.glob(pattern) if p != keep), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in old[KEEP_ARCHIVES - 1:]:
        p.unlink(missing_ok=True)


def build_env_archive(cache: Path | None = None, gzip_level: int = 1) -> Path:
    """Pack (or reuse) the running environment with deltacrawl installed; return the archive."""
    if not _in_venv():
        raise RuntimeError("deltacrawl package needs to run inside a virtual environment "
                           f"(this Python is {sys.executable}, not a venv)")
    cache = cache or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    env = list(_env_files())
    ours = list(_our_files(with_native=True))
    target = cache / f"deltacrawl-env-{_key(env, ours)}.tar.gz"
    site_rel = _site_packages().relative_to(Path(sys.prefix)).as_posix()
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_suffix(".partial")
        with tarfile.open(partial, "w:gz", compresslevel=gzip_level) as tar:
            for path, name in env:
                try:
                    tar.add(path, arcname=name, recursive=False)  # links stay links (bin/python)
                except FileNotFoundError:
                    pass  # removed since it was listed (a temporary file of another process)
            for path, name in ours:
                tar.add(path, arcname=f"{site_rel}/{name}", recursive=False)
        os.replace(partial, target)
        _prune(cache, "deltacrawl-env-*.tar.gz", target)
    return target


def build_code_zip(cache: Path | None = None) -> Path:
    """Zip (or reuse) our pure-Python code for --py-files / SparkContext.addPyFile."""
    cache = cache or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    ours = list(_our_files(with_native=False))
    target = cache / f"deltacrawl-code-{_key([], ours)}.zip"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path, name in ours:
                zf.write(path, name)
        os.replace(partial, target)
        _prune(cache, "deltacrawl-code-*.zip", target)
    return target


