"""A multi-model endpoint that churns models stays healthy (the short form of
scripts/mme_churn_soak.py, which runs 2,000): distinct models loaded, invoked and unloaded
with at most two loaded at once, /ping asked all the while. Every /ping answers 200, and the
model server's metrics page holds no series of an unloaded model, so it does not grow with the
number of models ever loaded (it grew by about 5 KB a model, and /ping, which read it, stopped
answering for good past 1 MiB). Memory is the script's to measure (it depends on the
allocator)."""

from __future__ import annotations

import pytest

from conftest import serve_stack
from loopback import ask
from repo_scripts import load_script

MODELS = 40
WARMUP = 10


@pytest.fixture(scope="module")
def churned(tmp_path_factory):
    soak = load_script("mme_churn_soak")
    tmp = tmp_path_factory.mktemp("churn")
    root = tmp / "models"
    root.mkdir()
    template = soak.build_template(tmp / "template" / "half_plus_three")
    with serve_stack(root, tmp, {"SAGEMAKER_MULTI_MODEL": "true"}) as server:
        report = soak.run(server, root, template, MODELS, WARMUP, 0.05, progress=False)
        page = ask(server.rest_ports[0], "GET", soak.METRICS_PATH, timeout=soak.DEADLINE)[
            1
        ].decode()
        yield report, page


def test_every_model_loads_answers_and_unloads(churned):
    report, _ = churned
    assert report["models"] == MODELS and report["problems"] == []


def test_ping_answers_200_throughout(churned):
    report, _ = churned
    ping = report["ping"]
    assert ping["pings"] > 0 and ping["failures"] == 0, ping["failure_examples"]


def test_the_metrics_page_keeps_no_series_of_unloaded_models(churned):
    report, page = churned
    assert report["flat_page"], (report["after_warmup"]["page"], report["end"]["page"])
    assert "mme-" not in page and "churn-" not in page, page[:2000]
