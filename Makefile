# The two set-up commands of the README: `make test` and `make demo`. Both create .venv and
# install dvlake into it first, so they work on a fresh machine with Python 3.11+ and Java 17/21.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help test test-fast lint format demo bench java-check clean

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory java-check
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,lint]'
	@touch $(STAMP)

java-check:
	@command -v java >/dev/null 2>&1 || { echo "ERROR: 'java' is not on PATH. Spark needs Java 17 or 21: install it, e.g. 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu), then re-run make." >&2; exit 1; }

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 20

test: lint  ## lint, then the whole test suite (unit, Spark, interop, cluster): what CI runs
	$(BIN)/python -m pytest --durations=25

test-fast: $(STAMP)  ## the Spark-free tests (tests/unit: codec, log, predicates, txn, SQL tokens) in seconds, while you work
	$(BIN)/python -m pytest tests/unit -q

lint: $(STAMP)  ## ruff (rules in pyproject.toml), mypy (typed defs) and the layer contracts (import-linter)
	$(BIN)/ruff check dvlake tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: $(STAMP)  ## apply ruff's safe fixes (imports, pyupgrade)
	$(BIN)/ruff check --fix dvlake tests bench

demo: $(STAMP)  ## run the main job (the Delta blog's DELETE) into ./demo-output
	$(BIN)/python -m dvlake.demo --output demo-output

bench: $(STAMP)  ## run the codec benchmark (others: .venv/bin/python bench/<name>.py --write-md)
	$(BIN)/python bench/codec.py

clean:  ## remove the venv and outputs
	rm -rf $(VENV) demo-output .pytest_cache
