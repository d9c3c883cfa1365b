# Quick start: `make serve` (serves an example model on localhost:8080), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: install test unit integration lint format perf clean

install: $(STAMP)

$(STAMP): setup.py pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

test: install
	$(PY) -m pytest -q -p no:cacheprovider

unit: install
	$(PY) -m pytest -q test/unit

integration: install
	$(PY) -m pytest -q test/integration

lint: install
	$(VENV)/bin/ruff check .

format: install
	$(VENV)/bin/ruff format container test

perf: install
	$(PY) test/perf/bench_model_server.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
