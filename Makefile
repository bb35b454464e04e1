# turbotfx: `make run` runs the pipeline on the embedded default, `make test` runs the tests.
# Both bootstrap .venv with python3.10 and install from the pinned lock (constraints.txt).

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=
# The suite's workers (pytest-xdist): one a core on the 2-core machines it is sized for. A module
# stays on one worker (its module fixtures built once; session fixtures once a worker), and
# modules are dealt in collection order: tests/cluster and tests/e2e, the pipeline runs, first,
# the many short modules filling in behind. xdist's own order (most tests first) left the
# single-test runs of a minute each for the end, with one worker idle.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# python3.10 on PATH, else a pyenv-installed 3.10 (a pyenv shim for an inactive version fails the probe).
PYTHON310 ?= $(shell for p in python3.10 $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -n 1); do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)

.PHONY: run test test-fast test-shuffled lint bench bench-trainer bench-lineage bench-serving bench-score bench-scale bench-columns bench-quality lock clean cluster-deps cluster-test test-packages

run: $(STAMP)
	$(VENV)/bin/turbotfx run $(ARGS)

# Lint and types first, so CI (.ci/run: make test) holds both. The tests start their own
# MariaDB and PostgreSQL servers on loopback: install the Debian packages first when missing.
test: $(STAMP) lint test-packages cluster-deps
	$(PYTEST) $(ARGS)

# The Debian packages the tests need (servers, a browser, Java and Maven for the cluster).
test-packages:
	bash tests/doubles/install_test_packages.sh

# Beam's Spark job server and the Spark engine, from Maven Central into .cache/cluster (mvn).
cluster-deps: $(STAMP)
	$(PY) -m pipeline.runners.spark.jars

# The whole pipeline on a Spark standalone cluster the tests start on loopback (also in `make test`).
cluster-test: $(STAMP) test-packages cluster-deps
	$(PY) -m pytest -m cluster $(ARGS)

# The daily loop: everything but the whole-pipeline runs (under 3 minutes on 2 cores).
test-fast: $(STAMP) lint test-packages
	$(PYTEST) -m "not e2e" $(ARGS)

# Every test in one process, in an order shuffled by SEED (printed in the header), so a test
# that leans on another's leftovers fails: slower than `make test`, for when time allows.
SEED ?= $(shell date +%s)
test-shuffled: $(STAMP) test-packages cluster-deps
	$(PY) -m pytest --shuffle $(SEED) --durations=25 $(ARGS)

# ruff over the tree; mypy over the library packages ([tool.mypy] in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/pipeline_bench.py $(ARGS)

# Trainer variants on 1M synthetic rows (the data is generated and transformed once, ~15 min).
bench-trainer: $(STAMP)
	$(PY) benchmarks/trainer_bench.py $(ARGS)

# The synthetic dataset at 10k, 100k and 1M rows up to Transform (+ a one-epoch Trainer) in
# each Beam mode, and whether auto picks the fastest (1M rows: minutes per mode).
# ARGS="--sizes 10000,100000" for a quick curve.
bench-scale: $(STAMP)
	$(PY) benchmarks/scale_bench.py $(ARGS)

bench-columns: $(STAMP)
	$(PY) benchmarks/columns_bench.py $(ARGS)

# `turbotfx lineage --latest` against a store holding 100 pipeline runs (one real run, copied).
bench-lineage: $(STAMP)
	$(PY) benchmarks/lineage_bench.py $(ARGS)

# Serving latency in-process and the client's overhead against the loopback test server.
bench-serving: $(STAMP)
	$(PY) benchmarks/serving_bench.py $(ARGS)

# `turbotfx score` rows/s at 100k and 1M rows in each Beam mode, beside in-process predict.
bench-score: $(STAMP)
	$(PY) benchmarks/score_bench.py $(ARGS)

# init + run with defaults on nine public tables (breast_cancer on request), each scored beside
# scikit-learn fitted on its run's own train split (docs/quality.md; ~10 min on 2 cores).
# ARGS="--tables caravan,oj" for a subset.
bench-quality: $(STAMP)
	$(PY) benchmarks/quality_bench.py $(ARGS)

$(STAMP): pyproject.toml constraints.txt
	@if [ -z "$(PYTHON310)" ]; then \
		echo "error: python3.10 was not found. turbotfx needs Python 3.10 (TFX 1.16 supports no newer)."; \
		echo "fix: install it (e.g. 'pyenv install 3.10' or 'apt-get install python3.10') and put it on PATH,"; \
		echo "     or point to it: make PYTHON310=/path/to/python3.10"; \
		exit 1; fi
	@[ -x $(PY) ] || { echo "creating $(VENV) with $(PYTHON310)"; $(PYTHON310) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $@

# Regenerate the lock from a fresh resolve of pyproject.toml (deliberately, never by hand).
# uv resolves this dependency tree in about a minute where pip backtracks for much longer.
lock: $(STAMP)
	$(PY) -m pip install --quiet uv
	{ echo "# Resolved, pinned dependency set of turbotfx (Python 3.10, Linux x86_64)."; \
	  echo "# Regenerate deliberately with 'make lock' (uv pip compile of pyproject.toml + dev extra); never edit by hand."; \
	  $(VENV)/bin/uv pip compile --quiet --python-version 3.10 --python-platform x86_64-manylinux_2_36 \
	    --no-header --no-annotate --extra dev pyproject.toml; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) workspace .cache
