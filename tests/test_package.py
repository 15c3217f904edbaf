"""jobs/engine/package.py: what the executors of a cluster get. The archive itself runs on a real
standalone cluster in tests/test_cluster.py; here, what goes into it (no archive is built)."""
from __future__ import annotations

import zipfile

from jobs.engine import package


def test_executors_get_the_crawlers_requirements_only():
    needed = package.executor_distributions()
    assert needed is not None  # deltacrawl is installed (make installs it, editable)
    for name in ("aiohttp", "selectolax", "protego", "warcio", "boto3", "datasketch", "pyarrow", "numpy",
                 "ada-url", "yarl"):  # yarl: what aiohttp requires in turn
        assert name in needed, name
    # driver-only requirements, Spark's own, and the test and analysis extras stay home
    for name in ("mlflow-skinny", "sqlalchemy", "alembic", "matplotlib", "sqlparse", "pyspark", "py4j",
                 "pytest", "moto", "duckdb", "polars", "deltalake", "nbclient", "ipykernel"):
        assert name not in needed, name


def test_a_setup_py_newer_than_the_install_packs_everything(tmp_path, monkeypatch, caplog):
    """After a `git pull` that added a requirement, without `make setup`, the installed metadata
    does not name it: leaving it out of the executors' archive would fail their tasks with a
    ModuleNotFoundError. So everything installed is packed, with a warning."""
    import os
    import time
    tree = tmp_path / "src"
    (tree / "crawl").mkdir(parents=True)
    (tree / "setup.py").write_text("# a newer setup.py\n")
    future = time.time() + 3600
    os.utime(tree / "setup.py", (future, future))
    monkeypatch.setattr(package, "_our_sources", lambda: {"crawl": tree / "crawl"})
    assert "changed after deltacrawl was installed" in package.stale_install()
    with caplog.at_level("WARNING", logger="deltacrawl.package"):
        assert package.executor_distributions() is None
    assert "packing every installed package" in caplog.text
    os.utime(tree / "setup.py", (1, 1))  # older than the install: its metadata is current
    assert package.stale_install() is None and package.executor_distributions() is not None


def test_archive_entries_leave_out_what_executors_never_import():
    names = [name for _path, name in package._env_files()]
    tops = {name.split("site-packages/", 1)[1].split("/", 1)[0] for name in names if "site-packages/" in name}
    assert {"aiohttp", "selectolax", "numpy", "botocore", "warcio"} <= tops
    assert not tops & {"mlflow", "matplotlib", "sqlalchemy", "pytest", "_pytest", "moto", "duckdb", "polars",
                       "pyspark", "py4j", "IPython"}
    assert "bin/python" in names and "pyvenv.cfg" in names
    ours = {name for _path, name in package._our_files(with_native=True)}
    assert {"crawl/net/urls.py", "jobs/fetch.py", "conf/defaults.toml"} <= ours


def test_code_zip_is_pure_python(tmp_path):
    path = package.build_code_zip(tmp_path)
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    assert {"crawl/net/urls.py", "jobs/fetch.py", "conf/defaults.toml", "conf/log4j2.properties"} <= names
    assert not [n for n in names if n.endswith(".so")]
    assert package.build_code_zip(tmp_path) == path  # unchanged code: the same zip, reused


def test_code_zip_carries_every_module_of_jobs_and_its_engine(tmp_path):
    """The steps import jobs.engine.*: an executor that got jobs/ without its subpackage would
    fail every task. Every module of the source tree is in the zip, and imports from it alone."""
    import pathlib
    import subprocess
    import sys
    source = pathlib.Path(package.__file__).resolve().parents[2]
    wanted = {p.relative_to(source).as_posix() for p in (source / "jobs").rglob("*.py")}
    assert "jobs/engine/session.py" in wanted and "jobs/engine/__init__.py" in wanted
    path = package.build_code_zip(tmp_path)
    with zipfile.ZipFile(path) as zf:
        assert wanted - set(zf.namelist()) == set()
    code = ("import sys\n"
            f"sys.path.insert(0, {str(path)!r})\n"
            "import jobs.engine.session, jobs.engine.tables, jobs.update\n"
            "print(jobs.engine.session.__file__, jobs.update.__file__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{path}/jobs/engine/session.py", f"{path}/jobs/update.py"]
