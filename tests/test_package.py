"""jobs/package.py: what the executors of a cluster get. The archive itself runs on a real
standalone cluster in tests/test_cluster.py; here, what goes into it (no archive is built)."""
from __future__ import annotations

import zipfile

from jobs import package


def test_executors_get_the_crawlers_requirements_only():
    needed = package.executor_distributions()
    assert needed is not None  # deltacrawl is installed (make installs it, editable)
    for name in ("aiohttp", "selectolax", "protego", "warcio", "boto3", "datasketch", "pyarrow", "numpy",
                 "yarl"):  # yarl: what aiohttp requires in turn
        assert name in needed, name
    # driver-only requirements, Spark's own, and the test and analysis extras stay home
    for name in ("mlflow-skinny", "sqlalchemy", "alembic", "matplotlib", "sqlparse", "pyspark", "py4j",
                 "pytest", "moto", "duckdb", "polars", "deltalake", "nbclient", "ipykernel"):
        assert name not in needed, name


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
