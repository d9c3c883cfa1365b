# Quick start: `make serve` (serves an example model on localhost:8080), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
GUARD := $(VENV)/lib/loopback_guard.so

.PHONY: install system-deps serve test unit integration lint format perf clean

install: system-deps $(STAMP) $(GUARD)

# nginx with its njs and headers-more modules, wrk for `make perf`/`make soak`, curl for the
# documentation's commands and the C compiler for the model server's guard (Debian packages),
# installed when missing.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
system-deps:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] || \
	    [ ! -e /usr/lib/nginx/modules/ngx_http_js_module.so ] || \
	    [ ! -e /usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so ] || \
	    ! command -v wrk >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1 || \
	    ! command -v cc >/dev/null 2>&1 || [ ! -e /usr/include/linux/inet_diag.h ] || \
	    ! python3 -c 'import ensurepip' >/dev/null 2>&1; then \
		echo "installing nginx, its njs and headers-more modules, wrk, curl, gcc and python3-venv"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			nginx libnginx-mod-http-js libnginx-mod-http-headers-more-filter wrk curl gcc \
			libc6-dev python3-venv \
			>/dev/null; \
	fi

# The project and its dependencies (setup.py: TensorFlow, tensorflow-serving-api, gunicorn,
# falcon, ... and the test and lint tools) in $(VENV), with pip's own progress.
$(STAMP): setup.py pyproject.toml
	@echo "make install: a Python environment in $(VENV) with this project (editable) and its"
	@echo "dependencies from setup.py (TensorFlow, tensorflow-serving-api, gunicorn, falcon, ...,"
	@echo "the test and lint tools): about 3 GB to download and unpack, a few minutes"
	python3 -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev]'
	@echo "make install: done, $(VENV) takes $$(du -sh $(VENV) | cut -f1)"
	touch $(STAMP)

# The model server's guard (docker/loopback_guard.c), which serve preloads into it: its ports are
# reached from this host only, and only by processes of serve's user.
$(GUARD): docker/loopback_guard.c | $(STAMP)
	cc -shared -fPIC -O2 -Wall -Wextra -Werror -o $@ $< -ldl

# The quick start's model: run/models/half_plus_three, with two versions that answer
# differently, 123 (y = 0.5x + 2) and the latest, 124 (y = 0.5x + 3). TensorFlow's output of
# the build goes to run/example-model.log (shown when the build fails). EXAMPLE_STAMP names
# this recipe: a model built by an older one is built again.
EXAMPLE_MODEL := run/models/half_plus_three
EXAMPLE_STAMP := run/.example-model-2
EXAMPLE_BUILD := PYTHONPATH=test/support $(PY) -m example_models

$(EXAMPLE_STAMP): | $(STAMP)
	@echo "building the example model $(EXAMPLE_MODEL) (versions 123 and 124)"
	@mkdir -p run/models && rm -rf $(EXAMPLE_MODEL) $(EXAMPLE_MODEL).tmp
	@{ $(EXAMPLE_BUILD) half_plus_two $(EXAMPLE_MODEL).tmp --version 123 && \
	   $(EXAMPLE_BUILD) half_plus_three $(EXAMPLE_MODEL).tmp --version 124; } \
	   > run/example-model.log 2>&1 || { cat run/example-model.log; exit 1; }
	@mv $(EXAMPLE_MODEL).tmp $(EXAMPLE_MODEL) && touch $@

.PHONY: example-model
example-model: $(EXAMPLE_STAMP)

# The whole stack (nginx + model server) on localhost:8080 (SAGEMAKER_BIND_TO_PORT), in the
# foreground; Ctrl-C stops it.
SERVE_PORT = $${SAGEMAKER_BIND_TO_PORT:-8080}
serve: install $(EXAMPLE_STAMP)
	@echo "Serving run/models on http://localhost:$(SERVE_PORT) (Ctrl-C stops). Try:"
	@echo "  curl -i localhost:$(SERVE_PORT)/ping"
	@echo "  curl -X POST localhost:$(SERVE_PORT)/invocations -d '{\"instances\":[1.0,2.0,5.0]}'"
	@echo "  curl -X POST localhost:$(SERVE_PORT)/invocations -H 'X-Amzn-SageMaker-Custom-Attributes: tfs-model-version=123' -d '1.0'"
	$(VENV)/bin/serve --model-dir $(abspath run/models) --run-dir $(abspath run/serve) --host 127.0.0.1

test: install
	$(PY) -m pytest -q -p no:cacheprovider

unit: install
	$(PY) -m pytest -q test/unit

integration: install
	$(PY) -m pytest -q test/integration

# The documentation site (mkdocs.yml, docs/) is built with --strict into a scratch directory: a
# broken link, a missing anchor or a page left out of nav fails (not --quiet: it hides the
# warnings that --strict counts, and the build passes).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@site=$$(mktemp -d) && trap 'rm -rf "$$site"' EXIT && \
		NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir "$$site"

format: install
	$(VENV)/bin/ruff format container test scripts examples

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
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache site

# ----- the image SageMaker runs ---------------------------------------------------------------
# `make image`: the CPU image (docker/Dockerfile), built by whatever engine is there (Docker, or
# podman installed and set up by scripts/engine.sh); its reference is the last line printed.
# IMAGE_VARIANTS=gpu (or arm64, or several) builds those instead.
.PHONY: image images image-test image-facts engine-stop
IMAGE_VARIANTS ?= cpu
image:
	@scripts/build.sh $(IMAGE_VARIANTS)

images:
	@scripts/build.sh cpu gpu arm64

# The built image run as SageMaker runs it (test/image: pytest with the Docker SDK against the
# engine's DOCKER_HOST), and published to a local registry. IMAGE=ref tests another image.
image-test: install
	@command -v docker-registry >/dev/null 2>&1 || { echo "installing docker-registry"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry \
			>/dev/null; }
	scripts/engine.sh exec $(PY) -m pytest -q -p no:cacheprovider test/image \
		$(if $(IMAGE),--image $(IMAGE))

# Sizes, layers, start to the first /ping, idle memory (perf-results/image_facts.json);
# IMAGE_FACTS_ARGS=--build also times a cold build (in an empty podman storage) and warm ones.
image-facts: install
	scripts/engine.sh exec $(PY) scripts/image_facts.py $(if $(IMAGE),--image $(IMAGE)) \
		$(IMAGE_FACTS_ARGS)

# Stop the podman API service that scripts/engine.sh started (Docker is left alone).
engine-stop:
	scripts/engine.sh stop
