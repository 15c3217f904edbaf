"""deltacrawl: a batch-iterative web crawler on Apache Spark with a Delta Lake crawl database."""
from setuptools import Extension, find_packages, setup

# The MinHash signature of crawl.dedup.fingerprint (crawl/dedup/_fasthash.c). Optional: without a
# C compiler the install still succeeds and the numpy original runs (same results, slower); a
# missing build is named at every step's start and in stats (crawl/native.py).
FASTHASH = Extension("crawl.dedup._fasthash", ["crawl/dedup/_fasthash.c"], optional=True, extra_compile_args=["-O2"])

# The engine of `deltacrawl sql` (crawl/sqlengine.py): DuckDB reading the Delta tables in place, and
# deltalake for their history and Change Data Feed. DuckDB's delta extension comes from PyPI, not from
# extensions.duckdb.org (unreachable here, and a download at run time): duckdb-extension-delta ships
# DuckDB's signed binary for exactly one DuckDB version, so the two are pinned together; so is
# duckdb-extension-httpfs, with which DuckDB reads a crawl root on S3.
SQL_ENGINE = ["duckdb==1.5.5", "duckdb-extension-delta==1.5.5", "duckdb-extension-httpfs==1.5.5", "deltalake>=1.6"]
# Reading the tables without Spark in Python besides (crawl/readers.py, docs/readers.md): polars reads
# deletion vectors through deltalake (>= 1.4.2). pandas: Spark's toPandas() in
# notebooks/crawl_analysis.ipynb (PySpark 4.2 does not fully support pandas >= 3).
ANALYSIS = ["polars>=2.1", "pandas>=2.0,<3"]

setup(
    name="deltacrawl",
    version="0.1.0",
    description="Batch-iterative web crawler on Apache Spark with a Delta Lake crawl database",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["crawl", "crawl.*", "jobs", "jobs.*", "conf"]),
    package_data={"conf": ["*.toml", "*.properties"]},
    include_package_data=True,
    ext_modules=[FASTHASH],
    install_requires=[
        # pyspark and delta-spark are a matched pair: delta-spark 4.4.x is built for Spark 4.2
        # (it declares pyspark<=4.2.0). The Delta jars (4.4.0) are cached by jobs/engine/jars.py.
        "pyspark==4.2.0",
        "delta-spark==4.4.0",
        "aiohttp>=3.9,<4",
        # WHATWG URL parsing (crawl/net/whatwg.py): ada, the parser of Node.js, fuzzed in OSS-Fuzz.
        # One exact version: we call its C API through the cffi module it builds (see there).
        "ada-url==4.0.0",
        "selectolax>=1.0",
        # PDF text, title and links (crawl/parse/pdf.py): pure Python; 7.1 has the per-call limits
        # (pypdf.apply_configuration) the parser sets. Measured against pdfminer.six and pdfplumber
        # in docs/parsers.md.
        "pypdf>=7.1,<8",
        "protego>=0.3",
        "pyarrow>=15",
        # vectorised hashing and schedules (crawl/crawldb/discovery.py, crawl/dedup/fingerprint.py, crawl/crawldb/schedule.py)
        "numpy>=1.26",
        "warcio>=1.7",
        # gzip for the WARC records and inflating response bodies (crawl/fetch/warc.py, crawl/fetch/http.py):
        # zlib-ng's drop-in zlib module, the same standard gzip in about half the CPU of zlib
        "zlib-ng>=1.0",
        # MinHash for the per-host near-duplicate (trap) signal and as the dedup peer
        "datasketch>=2.0",
        # WARC files straight to S3-compatible object storage from the fetch tasks (crawl/s3.py)
        "boto3>=1.28",
        # Run tracking (jobs/engine/tracking.py). mlflow-skinny, not mlflow: this environment is packed
        # and shipped to every executor, and full mlflow adds its UI build, scikit-learn, graphene,
        # gunicorn and a pyarrow downgrade (measured: +206 MB on the venv with what follows,
        # against ~310 MB). The SQLite tracking store needs sqlalchemy and alembic; the PNG
        # charts need matplotlib. `mlflow ui` (full mlflow) is for whoever reads the runs.
        # Upper bound: the UI must be installable at the client's version or newer, since a store
        # written by a newer client is refused by an older UI ("Detected out-of-date database
        # schema"). Full mlflow 3.18 needs mlflow-tracing 3.18, which this machine's PyPI mirror
        # does not serve, so `pip install mlflow` gives 3.17.2: the client stays below 3.18.
        # Raise the bound (and regenerate requirements-lock.txt: `make lock`) once the full
        # package of the new version installs here.
        "mlflow-skinny>=3.1,<3.18",
        "sqlalchemy>=2.0",
        "alembic>=1.13",
        "matplotlib>=3.8",
        # registrable domains for discovery.scope = "domain" (crawl/net/filters.py): the Public Suffix
        # List, bundled and dated in the package version (no network at run time)
        "publicsuffixlist>=1.0",
        # splitting `deltacrawl sql` scripts into statements (crawl/sqltext.py)
        "sqlparse>=0.5",
        # answering them in about a second, without a JVM (above)
        *SQL_ENGINE,
        # DNS through the servers fetch.dns_servers names, with each answer's TTL (crawl/fetch/dns.py):
        # c-ares, the resolver aiohttp's own AsyncResolver uses
        "aiodns>=4.0",
        # Content-Encoding br and zstd (crawl/fetch/http.py), decoded under the same limits as gzip
        "brotli>=1.1",
        "zstandard>=0.22",
        # the bundled test web as the internet looks: a local CA and certificates for its names
        # (crawl/devweb/tls.py) and a DNS server on loopback answering them (crawl/devweb/dns.py)
        "trustme>=1.1",
        "dnslib>=0.9.24",
    ],
    extras_require={"test": ["pytest>=8", "hypothesis>=6.100",
                             # make test runs the suite on two workers, a test module each
                             "pytest-xdist>=3.5",
                             # every test has a time bound (pyproject.toml: timeout), so a hang fails
                             # the test that hangs instead of stalling the run
                             "pytest-timeout>=2.3",
                             # make test lints first (config: pyproject.toml [tool.ruff])
                             "ruff==0.17.6",
                             # an S3 endpoint on loopback for the object-storage tests (tests/s3server.py)
                             "moto[server]>=5.0",
                             *ANALYSIS,
                             # tests/test_sql.py runs notebooks/crawl_analysis.ipynb top to bottom
                             "nbclient>=0.10", "nbformat>=5.10", "ipykernel>=6.29"],
                    "analysis": ANALYSIS},
    entry_points={"console_scripts": ["deltacrawl=jobs.cli:main"]},
)
