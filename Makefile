# The two set-up commands of the README: `make test` and `make demo`. Both create .venv and
# install dvlake into it first, so they work on a fresh machine with Python 3.11+ and Java 17/21.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench java-check clean

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory java-check
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,lint]'
	@touch $(STAMP)

java-check:
	@command -v java >/dev/null 2>&1 || { echo "ERROR: 'java' is not on PATH. Spark needs Java 17 or 21: install it, e.g. 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu), then re-run make." >&2; exit 1; }

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m dvlake.demo --output demo-output

bench: $(STAMP)
	$(BIN)/python bench/codec.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
