# The two set-up commands of the README: `make demo` and `make test`. Both create .venv and
# install dvlake into it first, so they work on a fresh machine with Python 3.11+ and Java 17/21.
# `make demo` installs dvlake and its own dependencies only; `make test` adds the test, bench and lint extras.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: help test test-fast test-objectstore emulators lint format demo bench java-check jar clean

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

# The native scan (jvm/): compiled against the installed pyspark's own jars into the package, one jar per Spark
# minor version; without javac dvlake reads through the pure-Python path.
SPARK_JARS = $(shell $(BIN)/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null)
SPARK_MINOR = $(shell $(BIN)/python -c 'import pyspark; print(".".join(pyspark.__version__.split(".")[:2]))' 2>/dev/null)
JAR = dvlake/jars/dvlake-scan-spark$(SPARK_MINOR).jar
JAVA_SOURCES = $(wildcard jvm/src/io/dvlake/spark/*.java) jvm/resources/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister

jar: $(BASE_STAMP)  ## build the native scan's jar (javac --release 17 against pyspark's jars) into dvlake/jars/
	@$(MAKE) --no-print-directory $(JAR)

$(JAR): $(JAVA_SOURCES) $(BASE_STAMP)
	@if command -v javac >/dev/null 2>&1; then \
		rm -rf build/jvm && mkdir -p build/jvm dvlake/jars && \
		javac --release 17 -nowarn -cp "$(SPARK_JARS)/*" -d build/jvm $(filter %.java,$(JAVA_SOURCES)) && \
		cp -r jvm/resources/META-INF build/jvm/ && jar cf $@ -C build/jvm . && echo "built $@"; \
	else echo "javac not found: the native scan is not built; dvlake reads through the pure-Python path (install a JDK to build it)"; fi

test: lint jar emulators  ## lint, build the jar, then the whole test suite (unit, Spark, interop, cluster, object stores): what CI runs
	$(BIN)/python -m pytest --durations=25

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
	rm -rf $(VENV) demo-output .pytest_cache build dvlake/jars
