"""tfs_client.grpc_stream against a real grpcio server on loopback: a streamed Predict's answer,
its status when the server answers before it has read the whole request, and a body that ends
before its size."""

from __future__ import annotations

import asyncio
import time
from concurrent import futures

import grpc
import pytest

from sagemaker_serving.tfs_client import grpc_stream
from sagemaker_serving.tfs_client.errors import ModelServerError
from sagemaker_serving.tfs_client.grpc_stream import BodyCut

SERVICE = "tensorflow.serving.PredictionService"
CHUNK = 1 << 16


@pytest.fixture
def server_port():
    """A gRPC server whose Predict answers the request's length; it takes messages of 1 MiB."""
    server = grpc.server(
        futures.ThreadPoolExecutor(2), options=[("grpc.max_receive_message_length", 1 << 20)]
    )
    predict = grpc.unary_unary_rpc_method_handler(
        lambda request, context: b"%d" % len(request),
        request_deserializer=lambda data: data,
        response_serializer=lambda data: data,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Predict": predict}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(0)


async def zeros(count: int):
    for _ in range(count):
        yield b"\0" * CHUNK


def predict(port: int, head: bytes, chunks: int, size: int) -> bytes:
    deadline = time.monotonic() + 30
    return asyncio.run(grpc_stream.predict(port, head, zeros(chunks), size, deadline))


def test_the_answer_to_a_head_and_its_streamed_values(server_port):
    assert predict(server_port, b"head", 8, 8 * CHUNK) == b"%d" % (4 + 8 * CHUNK)


def test_an_answer_before_the_whole_request_keeps_the_server_s_status(server_port):
    """Over the server's 1 MiB, grpcio answers RESOURCE_EXHAUSTED and resets the stream."""
    with pytest.raises(ModelServerError) as info:
        predict(server_port, b"", 128, 128 * CHUNK)
    assert info.value.status == 429
    assert "larger than max" in info.value.message


def test_a_body_that_ends_before_its_size_is_a_400(server_port):
    with pytest.raises(BodyCut) as info:
        predict(server_port, b"", 2, 4 * CHUNK)
    assert info.value.status == 400
