# FairEngine: `make demo` runs the demo audit, `make test` runs the test suite, `make lint`
# runs ruff and mypy (mypy's files and settings are in pyproject.toml).
# Each bootstraps .venv with the exact pins of constraints.txt on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

# Offline: no telemetry, no update checks (MLflow ignores DO_NOT_TRACK=1, hence "true").
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= true
export MLFLOW_DISABLE_TELEMETRY ?= true
export GX_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120

.PHONY: install demo test lint clean

$(BIN)/.fairengine-installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	touch $@

install: $(BIN)/.fairengine-installed

demo: install
	$(BIN)/fairengine demo

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf fairengine-runs .pytest_cache
