# deltacrawl — the two quick-start commands, and what they need.
#
#   make demo   set up, start the bundled local test web, crawl it for 3 cycles, print stats
#   make test   set up, run the whole test suite
#
# (make airflow: Airflow's own virtual environment, .venv-airflow, from airflow_dags/requirements-lock.txt;
#  make test sets it up too, for the tests of airflow_dags/.)
#
# Both are idempotent: the virtual environment (.venv) is rebuilt only when setup.py changes,
# and the jars are fetched from Maven Central once into ~/.cache/deltacrawl/jars: Delta's (both),
# and for the tests also hadoop-aws with the AWS SDK (s3a:// crawl roots).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JARS   := $(VENV)/.jars-s3
CRAWL_ROOT ?= ./crawl-data
# make test's pytest workers (pytest-xdist; each runs whole test modules). The suite's steps are
# mostly one busy thread each (a Spark driver planning, a cold JVM starting, a polite fetch
# waiting), so two workers keep a 2-core machine busy; 0 runs everything in one process.
TEST_WORKERS ?= 2
AIRFLOW_VENV  := .venv-airflow
AIRFLOW_LOCK  := airflow_dags/requirements-lock.txt
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

.PHONY: demo test setup airflow clean-data

# the demo's crawl fetches Delta's jars itself on first use (jobs/jars.py); it needs neither the
# S3 jars (hadoop-aws and the ~650 MB AWS SDK) nor Airflow, which only the tests use
demo: $(STAMP)
	$(BIN)/deltacrawl crawl --with-devweb --cycles 3 --crawl-root $(CRAWL_ROOT)

test: setup airflow
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

setup: $(STAMP) $(JARS)

$(STAMP): setup.py pyproject.toml crawl/dedup/_fasthash.c
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "deltacrawl needs Python >= 3.11"; exit 1; }
	@command -v java >/dev/null || { echo "deltacrawl needs Java 17 (java not found on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

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
