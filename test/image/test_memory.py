"""`docker run --memory 2g`: a model that fits serves; one that does not stops start-up with an
error that says so, and nothing hangs."""

from __future__ import annotations

import requests
from containers import START_TIMEOUT, Container, running
from image_models import resident_state_model

LIMIT = "2g"


def test_a_model_that_fits_serves(engine, image, tmp_path):
    resident_state_model(tmp_path / "state", 512 << 20)  # 512 MiB once loaded
    with running(engine, image, tmp_path, mem_limit=LIMIT) as container:
        reply = requests.post(
            f"{container.url}/invocations", data='{"instances": [1.0, 2.5]}', timeout=60
        )
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"predictions": [2.0, 5.0]}
        stats = container.container.stats(stream=False)
        assert stats["memory_stats"]["limit"] == 2 << 30
        assert container.stop() == 0


def test_a_model_that_does_not_fit_is_a_clear_error(engine, image, tmp_path):
    resident_state_model(tmp_path / "state", 3 << 30)  # 3 GiB once loaded, over the limit
    container = Container(engine, image, tmp_path, mem_limit=LIMIT)
    try:
        code = container.wait_exit(START_TIMEOUT)  # no hang: start-up ends with an error
        logs = container.logs()
    finally:
        container.remove()
    assert code != 0, logs[-3000:]
    assert "model-server-0 was killed by the kernel's out-of-memory killer" in logs, logs[-3000:]
    assert "memory limit of 2.0 GiB is too small" in logs, logs[-3000:]
