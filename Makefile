# Quick start: `make serve` (serves an example model on localhost:8080), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: install system-deps serve test unit integration lint format perf clean

install: system-deps $(STAMP)

# nginx with its njs and headers-more modules, and wrk for `make perf`/`make soak` (Debian
# packages), installed when missing.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
system-deps:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] || \
	    [ ! -e /usr/lib/nginx/modules/ngx_http_js_module.so ] || \
	    [ ! -e /usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so ] || \
	    ! command -v wrk >/dev/null 2>&1 || \
	    ! python3 -c 'import ensurepip' >/dev/null 2>&1; then \
		echo "installing nginx, its njs and headers-more modules, wrk and python3-venv"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			nginx libnginx-mod-http-js libnginx-mod-http-headers-more-filter wrk python3-venv \
			>/dev/null; \
	fi

$(STAMP): setup.py pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

EXAMPLE_MODEL := run/models/half_plus_three

$(EXAMPLE_MODEL): | $(STAMP)
	PYTHONPATH=test/support $(PY) -m example_models half_plus_three $@

# The whole stack (nginx + model server) on localhost:8080, in the foreground; Ctrl-C stops it.
serve: install $(EXAMPLE_MODEL)
	@echo "Serving run/models on http://localhost:8080 (Ctrl-C stops). Try:"
	@echo "  curl localhost:8080/ping -i"
	@echo "  curl -X POST localhost:8080/invocations -d '{\"instances\":[1.0,2.0,5.0]}'"
	@echo "  curl -X POST localhost:8080/invocations -H 'Content-Type: text/csv' -H 'Accept: text/csv' --data-binary \$$'1.0\\n2.0\\n'"
	@echo "  curl -X POST localhost:8080/invocations -H 'X-Amzn-SageMaker-Custom-Attributes: tfs-model-version=124' -d '1.0'"
	$(VENV)/bin/serve --model-dir $(abspath run/models) --run-dir $(abspath run/serve) --host 127.0.0.1

test: install
	$(PY) -m pytest -q -p no:cacheprovider

unit: install
	$(PY) -m pytest -q test/unit

integration: install
	$(PY) -m pytest -q test/integration

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format src test scripts examples

# Every path against the model server's own speed, with wrk: perf-results/report.md (+ .png, .json).
perf: install
	$(PY) test/perf/perf_report.py

# Hostile input: 10,000 cases against three native stacks, a table by outcome (perf-results/fuzz.json).
.PHONY: fuzz soak
fuzz: install
	$(PY) scripts/fuzz_stack.py --cases 10000

# 20,000 requests at concurrency 32 with wrk on the fast and user-code paths: errors, RSS growth.
soak: install
	$(PY) scripts/soak.py

# 2,000 distinct models loaded, invoked and unloaded on a multi-model endpoint: /ping, the model
# server's metrics page and every process's memory (perf-results/mme_churn.json).
.PHONY: mme-churn
mme-churn: install
	$(PY) scripts/mme_churn_soak.py

.PHONY: perf-container
perf-container: install
	$(PY) test/perf/bench_container.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache

# Docker images (needs a Docker engine): scripts/build.sh, tags <repo>:<version>-<processor>.
.PHONY: images
images:
	scripts/build.sh
