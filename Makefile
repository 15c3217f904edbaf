# deltacrawl — the two quick-start commands, and what they need.
#
#   make demo   set up, start the bundled local test web, crawl it for 3 cycles, print stats
#   make test   set up, run the whole test suite (building the JVM's class archive first, once:
#               jobs/engine/class_archive.py, so the tests' cold JVMs start from it)
#   make check  the inner loop's quick tier: lint, then the tests that start no JVM (no Spark, no
#               subprocess crawls, no cluster or Airflow), in a few minutes
#   make lock   regenerate requirements-lock.txt, the exact versions .venv is built from (see its header)
#
# (make airflow: Airflow's own virtual environment, .venv-airflow, from airflow_dags/requirements-lock.txt;
#  make test sets it up too, for the tests of airflow_dags/.)
#
# Both are idempotent: the virtual environment (.venv) is rebuilt only when setup.py or
# requirements-lock.txt changes,
# and the jars are fetched from Maven Central once into ~/.cache/deltacrawl/jars: Delta's (both),
# and for the tests also hadoop-aws with the AWS SDK (s3a:// crawl roots).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JARS   := $(VENV)/.jars-s3
LOCK   := requirements-lock.txt
# the mlflow-skinny version `make lock` pins: the lock's own, or `make lock MLFLOW_VERSION=3.x.y`
MLFLOW_VERSION ?= $(shell sed -n 's/^mlflow-skinny==//p' $(LOCK))
CRAWL_ROOT ?= ./crawl-data
# make test's pytest workers (pytest-xdist; each runs whole test modules). The suite's steps are
# mostly one busy thread each (a Spark driver planning, a cold JVM starting) with waits between
# (a polite fetch, a server's answer): on a 2-core machine three workers kept both cores 96 % busy
# and ran the suite in 21.8 min against two workers' 26.7 (docs/development.md); 0 runs
# everything in one process.
TEST_WORKERS ?= 3
AIRFLOW_VENV  := .venv-airflow
AIRFLOW_LOCK  := airflow_dags/requirements-lock.txt
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

.PHONY: demo test check setup lock airflow clean-data

# the demo's crawl fetches Delta's jars itself on first use (jobs/engine/jars.py); it needs neither the
# S3 jars (hadoop-aws and the ~650 MB AWS SDK) nor Airflow, which only the tests use
demo: $(STAMP)
	$(BIN)/deltacrawl crawl --with-devweb --cycles 3 --crawl-root $(CRAWL_ROOT)

test: setup airflow
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m jobs.engine.class_archive
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# the tests conftest.py marks neither spark (the shared SparkSession) nor slow (JVMs of their own,
# multi-cycle crawls): parsing, URLs, robots.txt, the fetcher against the test webs, the rules on
# the driver, the docs
check: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not spark and not slow" tests

# bench/'s own tests (the benchmarks' support code: the realistic web, the process-tree CPU count);
# not the crawler's, so not in make test
.PHONY: bench-test
bench-test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider bench/tests

setup: $(STAMP) $(JARS)

# .venv holds exactly the lock file's versions, then deltacrawl itself (editable, --no-deps), then
# two checks: pip check (the installed set is consistent) and LOCK_CHECK (every requirement of
# setup.py, the [test] extra included, is met: a pin or bound changed in setup.py without
# `make lock` stops here instead of running on versions setup.py does not allow).
$(STAMP): setup.py pyproject.toml crawl/dedup/_fasthash.c $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "deltacrawl needs Python >= 3.11"; exit 1; }
	@command -v java >/dev/null || { echo "deltacrawl needs Java 17 (java not found on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r $(LOCK)
	@# setuptools warns on every editable install that a folder named like a package may shadow it (ours
	@# are the package): one known line of noise, silenced
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python -m pip check
	$(BIN)/python -c "$$LOCK_CHECK"
	touch $(STAMP)

define LOCK_CHECK
import importlib.metadata as md, sys
from packaging.requirements import Requirement
def met(r):
    try:
        return r.specifier.contains(md.version(r.name), prereleases=True)
    except md.PackageNotFoundError:
        return False
wanted = [Requirement(s) for s in md.requires("deltacrawl")]
unmet = [str(r) for r in wanted if (r.marker is None or r.marker.evaluate({"extra": "test"})) and not met(r)]
if unmet:
    sys.exit("$(LOCK) does not meet setup.py: " + ", ".join(unmet) + " (regenerate it: make lock)")
endef
export LOCK_CHECK

# Regenerates $(LOCK) in a throw-away venv (its header, the comment lines at the top, is kept):
# the newest versions setup.py allows, with mlflow-skinny at $(MLFLOW_VERSION), after checking that the
# full mlflow of that version installs here (the `mlflow ui` of docs/mlflow.md). Then run make setup.
lock:
	@test -n "$(MLFLOW_VERSION)" || { echo "no mlflow-skinny version: make lock MLFLOW_VERSION=3.x.y"; exit 1; }
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/ui"; "$$tmp/ui/bin/pip" install -q --upgrade pip; \
	"$$tmp/ui/bin/pip" install -q "mlflow==$(MLFLOW_VERSION)"; "$$tmp/ui/bin/pip" check; \
	$(PYTHON) -m venv "$$tmp/venv"; "$$tmp/venv/bin/pip" install -q --upgrade pip; \
	"$$tmp/venv/bin/pip" install -q ".[test]" "mlflow-skinny==$(MLFLOW_VERSION)"; "$$tmp/venv/bin/pip" check; \
	{ sed '/^[^#]/,$$d' $(LOCK); "$$tmp/venv/bin/pip" freeze --exclude deltacrawl; } > "$$tmp/lock"; \
	cp "$$tmp/lock" $(LOCK)
	@echo "$(LOCK) made with mlflow-skinny $(MLFLOW_VERSION): docs/mlflow.md's 'pip install mlflow==' must name the same version"

# Airflow lives in its own venv so its pins never fight the crawler's; it is rebuilt from the lock
# file (exact versions, see its header) only when the lock file changes.
airflow: $(AIRFLOW_STAMP)

$(AIRFLOW_STAMP): $(AIRFLOW_LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Airflow's venv needs Python >= 3.11"; exit 1; }
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install -q -r $(AIRFLOW_LOCK)
	$(AIRFLOW_VENV)/bin/python -m pip check
	touch $(AIRFLOW_STAMP)

$(JARS): $(STAMP)
	$(BIN)/deltacrawl jars --s3 > /dev/null
	touch $(JARS)

clean-data:
	rm -rf $(CRAWL_ROOT) spark-warehouse metastore_db derby.log
