"""Built-in binary formats through the whole stack: images, .npy and tf.Example records go to
the model server over gRPC as tensors, and answer as the REST JSON path would."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
import requests

from conftest import serve_stack

tf = pytest.importorskip("tensorflow")
import example_models as em  # noqa: E402
from sagemaker_serving.formats.tfrecord import frame_tfrecord  # noqa: E402

CA = "X-Amzn-SageMaker-Custom-Attributes"


@pytest.fixture(scope="module")
def stack(digits_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("builtin_models")
    (root / "digits").symlink_to(digits_model, target_is_directory=True)
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    em.example_input(root / "examples")
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "digits"}
    with serve_stack(root, tmp_path_factory.mktemp("builtin_stack"), env) as server:
        yield server


def post(stack, body, content_type, accept=None, model=None):
    headers = {"Content-Type": content_type}
    if accept:
        headers["Accept"] = accept
    if model:
        headers[CA] = f"tfs-model-name={model}"
    return requests.post(f"{stack.url}/invocations", data=body, headers=headers, timeout=60)


def grpc_predicts(stack, model: str) -> int:
    """Predict calls the model server took over gRPC (its request_latency histogram count)."""
    text = requests.get(
        f"http://127.0.0.1:{stack.rest_ports[0]}/monitoring/prometheus/metrics", timeout=5
    ).text
    pattern = (
        r'request_latency_count\{model_name="'
        + model
        + r'",API="predict",entrypoint="GRPC"\} (\S+)'
    )
    return sum(int(float(value)) for value in re.findall(pattern, text))


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_a_jpeg_goes_by_grpc_and_answers_as_rest_would(stack):
    jpeg, label = em.digits_test_set()[0]
    before = grpc_predicts(stack, "digits")
    reply = post(stack, jpeg, "application/x-image")
    assert reply.status_code == 200, reply.text
    assert grpc_predicts(stack, "digits") == before + 1
    (ours,) = reply.json()["predictions"]
    direct = requests.post(
        f"http://127.0.0.1:{stack.rest_ports[0]}/v1/models/digits:predict",
        json={"instances": [{"b64": base64.b64encode(jpeg).decode()}]},
        timeout=60,
    ).json()["predictions"][0]
    assert ours["classes"] == direct["classes"] == label
    np.testing.assert_array_equal(
        np.float32(ours["probabilities"]), np.float32(direct["probabilities"])
    )


def test_images_answer_in_csv_and_json_lines(stack):
    jpeg, label = em.digits_test_set()[1]
    csv_row = post(stack, jpeg, "application/x-image", accept="text/csv").text.strip()
    assert len(csv_row.split(",")) == 11  # classes, then ten probabilities
    line = post(stack, jpeg, "application/octet-stream", accept="application/jsonlines").text
    assert json.loads(line)["classes"] == label


def test_a_broken_jpeg_is_a_400_json_from_the_model_server(stack):
    reply = post(stack, b"\xff\xd8 not a jpeg", "application/x-image")
    assert reply.status_code == 400, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.json()["error"]


def test_npy_of_the_models_dtype_goes_by_grpc_others_by_rest(stack):
    before = grpc_predicts(stack, "half_plus_three")
    exact = post(stack, npy(np.array([1.0, 2.0, 5.0], np.float32)), "application/x-npy",
                 model="half_plus_three")  # fmt: skip
    assert exact.json() == {"predictions": [3.5, 4.0, 5.5]}
    assert grpc_predicts(stack, "half_plus_three") == before + 1
    cast = post(stack, npy(np.array([1, 2, 5], np.int64)), "application/x-npy",
                model="half_plus_three")  # fmt: skip
    assert cast.json() == {"predictions": [3.5, 4.0, 5.5]}
    assert grpc_predicts(stack, "half_plus_three") == before + 1  # JSON converted the ints


def _example(x: float) -> bytes:
    feature = tf.train.Feature(float_list=tf.train.FloatList(value=[x]))
    return tf.train.Example(features=tf.train.Features(feature={"x": feature})).SerializeToString()


def test_tfrecord_multirecord_is_one_call_with_one_line_per_record_in_order(stack):
    xs = [1.0, 2.0, 4.0, 10.0, -2.0]
    body = b"".join(frame_tfrecord(_example(x)) for x in xs)
    before = grpc_predicts(stack, "examples")
    reply = post(stack, body, "application/x-tfexample", "application/jsonlines", "examples")
    assert reply.status_code == 200, reply.text
    assert grpc_predicts(stack, "examples") == before + 1
    assert [json.loads(line) for line in reply.text.splitlines()] == [[0.5 * x + 2] for x in xs]
    single = post(stack, _example(3.0), "application/x-tfexample", model="examples")
    assert single.json() == {"predictions": [[3.5]]}


def test_a_record_the_model_cannot_parse_is_a_400(stack):
    reply = post(stack, frame_tfrecord(b"\x0a\x03bad"), "application/x-tfexample", model="examples")
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]


def _corrupt_npz() -> bytes:
    out = io.BytesIO()
    np.savez(out, x=np.arange(8.0))
    body = bytearray(out.getvalue())
    body[60:80] = b"\xff" * 20  # the member no longer matches its CRC-32
    return bytes(body)


def _bad_code_point_npy() -> bytes:
    body = bytearray(npy(np.array(["a"], dtype="<U1")))
    body[-4:] = (0x110000).to_bytes(4, "little")  # beyond Unicode: no str can hold it
    return bytes(body)


@pytest.mark.parametrize(
    ("body", "model"),
    [
        (_corrupt_npz(), "half_plus_three"),
        (_bad_code_point_npy(), "half_plus_three"),  # REST path
        (_bad_code_point_npy(), "examples"),  # a string input: the gRPC tensor path
    ],
)
def test_npy_bodies_no_decoder_can_read_are_400_json(stack, body, model):
    reply = post(stack, body, "application/x-npy", model=model)
    assert reply.status_code == 400, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    assert "Could not decode" in reply.json()["error"]
