# Quick start: `make serve` (serves an example model on localhost:8080), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: install serve test unit integration lint format perf clean

install: $(STAMP)

$(STAMP): setup.py pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

EXAMPLE_MODEL := run/models/half_plus_three

$(EXAMPLE_MODEL): | $(STAMP)
	$(PY) -m example_models half_plus_three $@

serve: install $(EXAMPLE_MODEL)
	$(VENV)/bin/tfs-model-server --model_name=half_plus_three \
		--model_base_path=$(abspath $(EXAMPLE_MODEL)) --port=8500 --rest_api_port=8080 \
		--bind_address=127.0.0.1

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
