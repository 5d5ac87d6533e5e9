# The two set-up commands of the README: `make demo` and `make test`. Both create .venv and
# install dvlake into it first, so they work on a fresh machine with Python 3.11+ and Java 17/21.
# `make demo` installs dvlake and its own dependencies only; `make test` adds the test, bench and lint extras.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: help minors-install test test-quick test-fast test-minors test-objectstore emulators lint format demo bench java-check jar clean

$(BASE_STAMP): pyproject.toml
	@$(MAKE) --no-print-directory java-check
	@echo "creating $(VENV) and installing dvlake with PySpark (about 450 MB to download on a first run) ..."
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e .
	@touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	@echo "installing the test, bench and lint extras (pytest, delta-rs, DuckDB, ruff, mypy, ...) ..."
	@$(BIN)/python -m pip install --quiet -e '.[test,bench,lint]'
	@touch $(STAMP)

# The object-store tests' emulators (tests/objectstore): moto's S3 server comes with the test extra; Azurite (Azure
# Blob / ADLS) is an npm package, installed here into the venv's own folder, never globally. 3.35.0 is the last Azurite
# release that runs on Node 20 (3.36 wants Node 21+, 3.37 Node 22).
AZURITE_VERSION := 3.35.0
NODE_DIR := $(VENV)/node
AZURITE := $(NODE_DIR)/node_modules/.bin/azurite-blob

emulators: $(AZURITE)  ## install Azurite from npm into .venv/node for the object-store tests (moto comes with the test extra)

$(AZURITE):
	@command -v npm >/dev/null 2>&1 || { echo "ERROR: 'npm' is not on PATH. The object-store tests run Azurite (npm): install Node.js 20+ with npm, e.g. 'apt-get install nodejs npm' (Debian/Ubuntu), then re-run make." >&2; exit 1; }
	@echo "installing Azurite $(AZURITE_VERSION) from npm into $(NODE_DIR) ..."
	@mkdir -p $(NODE_DIR)
	@npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	@test -x $@ && touch $@

java-check:
	@command -v java >/dev/null 2>&1 || { echo "ERROR: 'java' is not on PATH. Spark needs Java 17 or 21: install it, e.g. 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu), then re-run make." >&2; exit 1; }

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 20

# The native scan (dvlake/jvm/): `python -m dvlake.native_jar` compiles it (javac --release 17) against the installed
# pyspark's own jars into dvlake/jars/, stamped with its sources' digest; without javac it says so and dvlake reads
# through the pure-Python path. A user never needs this: dvlake compiles the jar for the Spark it meets on first use.
jar: $(BASE_STAMP)  ## build the native scan's jar for the installed PySpark into dvlake/jars/ (what a wheel then carries)
	@$(BIN)/python -m dvlake.native_jar

# The other PySpark 4 minors: each one's pyspark alone (no dependencies: the venv's serve every minor) in .spark/4.N,
# put first on the path for a tier of the tests; its jar is compiled on first use like a user's.
MINORS ?= 4.0 4.1 4.2
# (the native scan's differential core on both read paths: row groups, splits, pages, partitions, nested rows, DML's
# row indexes, the listing protocol; then a pip user's first session. test_native_scan.py runs whole on 4.3)
MINOR_TIER = tests/spark/test_native_scan.py tests/spark/test_first_use.py -k "many_row_groups or row_group_tracking \
	or which_row_index_source or odd_paths or nested_columns or marks_the_same_rows or copy_on_write_update_and_delete \
	or keyed_scan or another_protocol or first_session"
.spark/%/.installed:
	@echo "installing pyspark $*.* into .spark/$* (its jars; the venv's dependencies serve it) ..."
	@rm -rf .spark/$* && $(BIN)/python -m pip install --quiet --no-deps --target .spark/$* 'pyspark==$*.*'
	@touch $@

test-minors: $(STAMP) $(foreach m,$(MINORS),.spark/$(m)/.installed)  ## the native scan, DML, streaming, catalog and interop tier on PySpark 4.0, 4.1, 4.2
	@for m in $(MINORS); do \
		echo "=== PySpark $$m ==="; \
		PYTHONPATH=.spark/$$m $(BIN)/python -m pytest -q -p no:cacheprovider $(MINOR_TIER) || exit 1; \
	done

# TEST_WORKERS=N runs the suite in N pytest-xdist processes (whole test files to a worker, one local[2] session
# each). Measured on CI's 2 cores it did not pay: the suite is CPU-bound (load 6-9 with two workers; 3,765 s for
# 2,256 tests against 3,637 s for 2,127 in one process) and two streaming tests timed out under the load, so CI runs
# one process.
TEST_WORKERS ?= 0

# While the suite runs on 4.3, the other minors' pyspark (sdists, minutes of mostly unpacking) install beside it.
test: lint jar emulators  ## lint, build the jar, the whole suite on the installed PySpark (4.3; object stores too), then the tier on 4.0-4.2: what CI runs
	@mkdir -p .spark; \
	( $(MAKE) --no-print-directory minors-install > .spark/install.log 2>&1 ) & installer=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25; status=$$?; \
	wait $$installer || { echo "installing the other PySpark minors failed:" >&2; cat .spark/install.log >&2; exit 1; }; \
	exit $$status
	@$(MAKE) --no-print-directory test-minors

minors-install: $(foreach m,$(MINORS),.spark/$(m)/.installed)  ## install pyspark 4.0-4.2 into .spark/ (for test-minors)

# The middle tier: what a change to commands, Spark or the log must pass before its commit, in minutes rather than
# the whole suite's twenty: no cluster daemons, no delta-rs/DuckDB interop directory, no test marked slow.
QUICK_TESTS = tests/unit tests/spark tests/reliability tests/cli

test-quick: $(STAMP)  ## unit + Spark tests not marked slow/cluster (about 8 minutes on 2 free cores): before every commit
	$(BIN)/python -m pytest $(QUICK_TESTS) -m "not slow and not cluster" -q --durations=15

test-fast: $(STAMP)  ## the Spark-free tests (tests/unit: codec, log, predicates, txn, SQL tokens) in seconds, while you work
	$(BIN)/python -m pytest tests/unit -q

test-objectstore: $(STAMP) emulators  ## only the object-store tests (S3 on moto, Azure on Azurite; a couple of minutes)
	$(BIN)/python -m pytest -m objectstore tests/objectstore -q

lint: $(STAMP)  ## ruff (rules in pyproject.toml), mypy (typed defs) and the layer contracts (import-linter)
	$(BIN)/ruff check dvlake tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: $(STAMP)  ## apply ruff's safe fixes (imports, pyupgrade)
	$(BIN)/ruff check --fix dvlake tests bench

demo: jar  ## install dvlake (no test extras), run the main job (the Delta blog's DELETE) into ./demo-output
	@echo "running the demo: it builds a 3M-row table, then DELETEs with and without deletion vectors (a few minutes on 2 cores) ..."
	@$(BIN)/python -m dvlake.demo --output demo-output

bench: $(STAMP)  ## run the codec benchmark (others: .venv/bin/python bench/<name>.py --write-md)
	$(BIN)/python bench/codec.py

clean:  ## remove the venv and outputs
	rm -rf $(VENV) demo-output .pytest_cache build dvlake/jars .spark
