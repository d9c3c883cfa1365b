"""The image as an asynchronous endpoint (docs/hosting-modes.md): a 1 GiB request answered
within a memory limit, one byte more refused before its body is read, and
SAGEMAKER_MODEL_SERVER_TIMEOUT as the invocation's deadline with /ping quick meanwhile."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

from containers import running

from large_bodies import PeakSampler, npy_file, post_npy
from slow_invocations import SLEEPER, sleep_everywhere

GIB = 1 << 30
# One 1 GiB x-npy request on top of the idle stack (docs/hosting-modes.md): the service streams
# it to the model server's gRPC Predict and holds none of it; the model server receives and
# makes the tensor. Held whole by the service, as it was, it needed over 7 GiB.
MEMORY_LIMIT = "5g"
SLOW_SECONDS = 40


def _anon_bytes(container) -> int:
    """The container's anonymous memory (what a memory limit cannot reclaim), cgroup v2 or v1."""
    for path, keys in (
        ("/sys/fs/cgroup/memory.stat", ("anon", "shmem")),
        ("/sys/fs/cgroup/memory/memory.stat", ("total_rss", "total_shmem")),
    ):
        code, text = container.exec("cat", path)
        if code == 0:
            stat = dict(line.split() for line in text.splitlines())
            return sum(int(stat.get(key, 0)) for key in keys)
    raise AssertionError("no memory.stat in the container")


def test_a_1_gib_request_is_answered_within_the_memory_limit_and_one_byte_more_is_413(
    engine, image, tmp_path
):
    import example_models as em

    em.variable_length(tmp_path / "model" / "sums", 1)  # x [None, None] -> row sums
    body = tmp_path / "body.npy"
    rows, total = npy_file(body, 1024)  # 178481 x 1504 float32 and its header: 1 GiB
    assert body.stat().st_size == GIB
    env = {"SAGEMAKER_MAX_REQUEST_SIZE": str(GIB), "SAGEMAKER_MODEL_SERVER_TIMEOUT": "900"}
    with running(engine, image, tmp_path / "model", env=env, mem_limit=MEMORY_LIMIT) as container:
        idle = _anon_bytes(container)
        sampler = PeakSampler(lambda: {"container": _anon_bytes(container)}, 0.2)
        sampler.start()
        reply = post_npy(container.url, body)
        sampler.stop()
        assert reply.status_code == 200, reply.text[:1000]
        sums = reply.json()["predictions"]
        assert len(sums) == rows
        assert abs(sum(sums) - total) < 1e-3 * total
        print(f"1 GiB: peak {(sampler.peak - idle) / GIB:.2f}x the body over {idle >> 20} MiB")

        # one byte more: refused on its Content-Length, before any of the body is sent
        target = urlsplit(container.url)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        connection.putrequest("POST", "/invocations")
        connection.putheader("Content-Type", "application/x-npy")
        connection.putheader("Content-Length", str(GIB + 1))
        connection.endheaders()
        over = connection.getresponse()
        assert over.status == 413
        assert over.getheader("Content-Type") == "application/json"
        assert f"over the limit of {GIB} bytes" in json.loads(over.read())["error"]
        connection.close()
        assert container.stop() == 0


def test_the_model_server_timeout_is_the_invocation_s_deadline_and_ping_stays_quick(
    engine, image, tmp_path
):
    """A 40 s handler: 200 with SAGEMAKER_MODEL_SERVER_TIMEOUT=60, 504 JSON at 20 s with =20;
    /ping answers quickly meanwhile, with every handler thread busy."""
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    (tmp_path / "model" / "code").mkdir()
    (tmp_path / "model" / "code" / "inference.py").write_text(SLEEPER)
    threads = 8  # one worker: requests spread over several unevenly, and would queue
    common = {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_THREADS": str(threads)}
    with (
        running(engine, image, tmp_path / "model",
                env={**common, "SAGEMAKER_MODEL_SERVER_TIMEOUT": "60"}) as long,
        running(engine, image, tmp_path / "model",
                env={**common, "SAGEMAKER_MODEL_SERVER_TIMEOUT": "20"}) as short,
    ):  # fmt: skip
        started = time.monotonic()
        run = sleep_everywhere({"t60": long.url, "t20": short.url}, SLOW_SECONDS, threads)
        assert time.monotonic() - started < SLOW_SECONDS + 30
    run.check_deadlines(SLOW_SECONDS, {"t60": 60, "t20": 20})
