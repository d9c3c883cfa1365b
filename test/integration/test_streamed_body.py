"""A large x-npy body without user code goes on to the model server as it arrives
(tfs_client/grpc_stream.py): answered as a small one is, never held whole by the service;
a body it cannot stream is read whole and answered as before; a client that leaves mid-body
costs nothing after it."""

from __future__ import annotations

import io
import socket
import threading
import time

import numpy as np
import psutil
import pytest
import requests

from conftest import serve_stack
from sagemaker_serving.service.pipeline import STREAMED_BODY

NPY = {"Content-Type": "application/x-npy"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    import example_models as em

    root = tmp_path_factory.mktemp("streamed")
    em.variable_length(root / "model" / "sums", 1)  # x [None, None] float32 -> row sums
    env = {"SAGEMAKER_MAX_REQUEST_SIZE": str(96 << 20)}
    with serve_stack(root / "model", root, env) as server:
        yield server


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def rows(count: int, columns: int = 4096, dtype: str = "<f4") -> np.ndarray:
    return (np.arange(count, dtype=np.float64)[:, None] / 64 + np.zeros(columns)).astype(dtype)


def service_memory(serve_pid: int) -> int:
    """The resident memory of the Python service's processes."""
    total = 0
    for proc in psutil.Process(serve_pid).children(recursive=True):
        try:
            if "python_service" in " ".join(proc.cmdline()):
                total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def post(url: str, body: bytes, attributes: str | None = None) -> requests.Response:
    headers = dict(NPY)
    if attributes:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    return requests.post(f"{url}/invocations", data=body, headers=headers, timeout=120)


def posted_with_peak(stack, body: bytes) -> tuple[requests.Response, int]:
    """The answer to `body`, and how much the service's memory grew meanwhile at its peak."""
    idle = service_memory(stack.proc.pid)
    peak, done = [idle], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], service_memory(stack.proc.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        return post(stack.url, body), peak[0] - idle
    finally:
        done.set()
        sampler.join()


def test_a_large_body_is_answered_as_a_small_one_and_never_held_whole_by_the_service(stack):
    array = rows(4096)  # 64 MiB and the header
    body = npy(array)
    assert len(body) > STREAMED_BODY
    reply, grew = posted_with_peak(stack, body)
    assert reply.status_code == 200, reply.text[:500]
    np.testing.assert_allclose(reply.json()["predictions"], array.sum(axis=1), rtol=1e-5)
    small = post(stack.url, npy(array[:3]))
    assert small.json()["predictions"] == reply.json()["predictions"][:3]
    assert grew < len(body) / 2, f"the service grew {grew >> 20} MiB"


def test_float64_values_for_a_float32_input_stream_cast_as_the_json_path_casts_them(stack):
    array = rows(1024, dtype="<f8") + 1 / 3  # numpy's default dtype; values float32 rounds
    body = npy(array)
    assert len(body) > STREAMED_BODY
    reply, grew = posted_with_peak(stack, body)
    assert reply.status_code == 200, reply.text[:500]
    sums = reply.json()["predictions"]
    np.testing.assert_allclose(sums, array.astype("<f4").sum(axis=1), rtol=1e-5)
    by_json = post(stack.url, npy(array[:40])).json()["predictions"]  # small: the JSON path
    np.testing.assert_allclose(sums[:40], by_json, rtol=1e-6)
    assert grew < len(body) / 2, f"the service grew {grew >> 20} MiB"


def test_a_body_it_cannot_stream_is_read_whole_and_answered_as_before(stack):
    array = rows(600)  # just over STREAMED_BODY as float32; big-endian, it takes the JSON path
    big_endian = npy(array.astype(">f4"))
    assert len(big_endian) > STREAMED_BODY
    reply = post(stack.url, big_endian)
    assert reply.status_code == 200, reply.text[:500]
    np.testing.assert_allclose(reply.json()["predictions"], array.sum(axis=1), rtol=1e-5)


def test_a_header_that_promises_more_than_the_body_is_a_400(stack):
    body = npy(rows(600))
    short = body[: len(body) - 4096]  # the header still says 600 rows
    reply = post(stack.url, short)
    assert reply.status_code == 400
    assert reply.headers["Content-Type"] == "application/json"
    values = 600 * 4096 * 4
    assert reply.json()["error"] == (
        f"application/x-npy: the array's header says {values} bytes of values "
        f"(float32 (600, 4096)), the body holds {values - 4096}"
    )


@pytest.mark.parametrize(
    "attributes", ["tfs-model-version=7", "tfs-model-version=99999999999999999999"]
)
def test_the_model_server_s_errors_are_a_small_body_s_errors(stack, attributes):
    large, small = (
        post(stack.url, npy(rows(600)), attributes),
        post(stack.url, npy(rows(2)), attributes),
    )
    assert large.status_code == small.status_code != 200
    assert large.json()["error"] == small.json()["error"]


def test_a_client_that_leaves_mid_body_costs_nothing_after_it(stack):
    body = npy(rows(2048))
    host, port = stack.url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=30) as client:
            client.sendall(
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body[: len(body) // 2]
            )
    reply = post(stack.url, body)
    assert reply.status_code == 200, reply.text[:500]
    assert requests.get(f"{stack.url}/ping", timeout=10).status_code == 200
