# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use and installs what it needs.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test docs bench bench-postgres lint typecheck clean crash fuzz bench-langgraph bench-compat bench-aio bench-ui bench-scale bench-documents-history bench-trees

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-base

demo: $(VENV)/.installed-base
	$(PY) -m durastate.demo

# The suite in TEST_WORKERS pytest-xdist processes taking the next test of one
# queue each (--maxschedchunk 1), long tests first (tests/conftest.py): CI has
# 2 cores, and the suite waits on PostgreSQL, subprocesses and pi-durable's
# own paced suite about as much as it computes, so 3 keep both cores busy.
# TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3
# compileall: the bytecode of src/ written once, so the suite's many subprocesses (CLI, examples, crash and
# multi-process tests) read it instead of compiling durastate each (PYTHONDONTWRITEBYTECODE=1 in the environment
# keeps Python from caching it on its own; compileall writes it regardless).
test: $(VENV)/.installed-test
	$(PY) -m compileall -q src
	$(PY) -m ruff check src tests bench
	$(PY) -m mypy
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist load --maxschedchunk 1)

# The documentation site into site/ (tests/test_docs.py builds it too, and runs every example).
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

bench: $(VENV)/.installed-test
	$(PY) bench/run.py

# Needs a PostgreSQL server: --url, DURASTATE_BENCH_POSTGRES_URL,
# DURASTATE_TEST_POSTGRES_URL or postgresql://postgres@127.0.0.1:5432/postgres.
bench-postgres: $(VENV)/.installed-test
	$(PY) bench/postgres.py

# Latency of every facet's hot ops at 1e3 and 1e5 rows on SQLite and PostgreSQL
# (same server lookup as bench-postgres); SIZES=1000,100000,1000000 for the big run.
SIZES ?= 1000,100000
bench-scale: $(VENV)/.installed-test
	$(PY) bench/scale.py --sizes $(SIZES)

# The native benchmarks' ops on an older revision (OLD, default 473d9c3, issue 9's
# "before") against this checkout: two worker processes, interleaved, CPU time.
OLD ?= 473d9c3
bench-trees: $(VENV)/.installed-test
	$(PY) bench/compare_trees.py --old $(OLD)

lint: $(VENV)/.installed-test
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench

typecheck: $(VENV)/.installed-test
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .durastate .pytest_cache .mypy_cache .ruff_cache

bench-records: $(VENV)/.installed-test
	$(PY) bench/records.py

bench-documents: $(VENV)/.installed-test
	$(PY) bench/documents.py

# What document revision history costs (history off vs on, and against main's facet).
bench-documents-history: $(VENV)/.installed-test
	$(PY) bench/documents_history.py --baseline main

bench-events: $(VENV)/.installed-test
	$(PY) bench/events.py

# Long crash-cycle run (CI runs 100 SQLite / 33 PostgreSQL cycles inside `make test`).
crash: $(VENV)/.installed-test
	DURASTATE_CRASH_CYCLES=$${CYCLES:-1000} $(PY) -m pytest tests/crash -q -s

# Longer fuzz run over every facet and compat adapter entry point (CI runs 25 examples per
# entry point on SQLite, 8 on PostgreSQL, inside `make test`); prints how each entry point's
# inputs ended (accepted, refused with which error).
fuzz: $(VENV)/.installed-test
	DURASTATE_FUZZ_STATS=1 DURASTATE_FUZZ_EXAMPLES=$${EXAMPLES:-500} $(PY) -m pytest tests/fuzz -q

# DurastateSaver against LangGraph's SqliteSaver / PostgresSaver and their
# async twins; the PostgreSQL pairs need a server (--postgres-url,
# DURASTATE_TEST_POSTGRES_URL or postgresql://postgres@127.0.0.1:5432/postgres).
bench-langgraph: $(VENV)/.installed-test
	$(PY) bench/langgraph.py

# The drop-in adapters against the seeds' own approaches (compat.vgi vs
# bench/vgi_style.py, compat.functualize vs bench/functualize_style.py).
bench-compat: $(VENV)/.installed-test
	$(PY) bench/compat.py

# durastate.aio against the sync API: uncontended SQLite calls, a loop that
# never stalls while another process holds the write lock, and (when a
# server is reachable) 200 coroutines over a PostgreSQL pool of 10.
bench-aio: $(VENV)/.installed-test
	$(PY) bench/aio.py

bench-ui: $(VENV)/.installed-test
	$(PY) bench/ui.py
