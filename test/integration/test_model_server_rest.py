"""tfs-model-server over REST, on real SavedModels, compared with TF Serving's answers."""

from __future__ import annotations

import base64
import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import model_server

CONFIG = """
model_config_list {{
  config {{ name: 'half_plus_two' base_path: '{root}/half_plus_two' model_platform: 'tensorflow' }}
  config {{ name: 'tf2' base_path: '{root}/half_plus_two_tf2' model_platform: 'tensorflow' }}
  config {{ name: 'multi_io' base_path: '{root}/multi_io' model_platform: 'tensorflow' }}
  config {{ name: 'strings' base_path: '{root}/string_input' model_platform: 'tensorflow' }}
  config {{ name: 'keras' base_path: '{root}/keras' model_platform: 'tensorflow' }}
  config {{
    name: 'half_plus_three' base_path: '{root}/half_plus_three' model_platform: 'tensorflow'
    model_version_policy {{ all {{}} }}
    version_labels {{ key: 'stable' value: 123 }}
    version_labels {{ key: 'canary' value: 124 }}
  }}
}}
"""


@pytest.fixture(scope="module")
def server(model_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rest")
    config = tmp / "models.config"
    config.write_text(CONFIG.format(root=model_root))
    with model_server(
        [f"--model_config_file={config}"], tmp / "server.log", ready_model="keras"
    ) as srv:
        yield srv


def post(server, path: str, body) -> requests.Response:
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(f"{server.rest}{path}", data=data, timeout=30)


def test_predict_row_format_matches_tf_serving_exactly(server):
    reply = post(server, "/v1/models/half_plus_two:predict", {"instances": [1.0, 2.0, 5.0]})
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.text == '{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'


def test_predict_columnar_format(server):
    reply = post(server, "/v1/models/half_plus_two:predict", {"inputs": [1.0, 2.0, 5.0]})
    assert reply.status_code == 200
    assert reply.json() == {"outputs": [2.5, 3.0, 4.5]}


def test_status_of_all_versions_latest_first(server):
    reply = requests.get(f"{server.rest}/v1/models/half_plus_three", timeout=10)
    assert reply.status_code == 200
    statuses = reply.json()["model_version_status"]
    assert [s["version"] for s in statuses] == ["124", "123"]
    assert all(s["state"] == "AVAILABLE" for s in statuses)
    assert statuses[0]["status"] == {"error_code": "OK", "error_message": ""}


def test_status_of_one_version_and_every_version_for_a_label(server):
    """As TF Serving's GetModelStatus (get_model_status_impl.cc), which reads only a version:
    a label in the path is not resolved, and the answer lists every version."""
    one = requests.get(f"{server.rest}/v1/models/half_plus_three/versions/123", timeout=10).json()
    assert [s["version"] for s in one["model_version_status"]] == ["123"]
    label = requests.get(f"{server.rest}/v1/models/half_plus_three/labels/canary", timeout=10)
    assert [s["version"] for s in label.json()["model_version_status"]] == ["124", "123"]
    unknown = requests.get(f"{server.rest}/v1/models/half_plus_three/labels/gold", timeout=10)
    assert unknown.status_code == 200


def test_versions_and_labels_route_predictions(server):
    body = {"instances": [2.0]}
    assert post(server, "/v1/models/half_plus_three:predict", body).json() == {"predictions": [4.0]}
    v123 = post(server, "/v1/models/half_plus_three/versions/123:predict", body)
    assert v123.json() == {"predictions": [4.0]}
    stable = post(server, "/v1/models/half_plus_three/labels/stable:predict", body)
    assert stable.status_code == 200


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/v1/models/nope:predict", 404, "Servable not found for request: Latest(nope)"),
        (
            "/v1/models/half_plus_two/versions/7:predict",
            404,
            "Servable not found for request: Specific(half_plus_two, 7)",
        ),
        (
            "/v1/models/half_plus_three/labels/gold:predict",
            400,
            "Unrecognized servable version label: gold",
        ),
    ],
)
def test_unknown_model_version_label(server, path, status, text):
    reply = post(server, path, {"instances": [1.0]})
    assert reply.status_code == status
    assert reply.json() == {"error": text}


def test_unknown_model_status_is_404(server):
    reply = requests.get(f"{server.rest}/v1/models/nope", timeout=10)
    assert reply.status_code == 404
    assert "Could not find any versions of model nope" in reply.json()["error"]


def test_classify_and_regress_use_results_key(server):
    status = requests.get(f"{server.rest}/v1/models/half_plus_two/metadata", timeout=10).json()
    signatures = status["metadata"]["signature_def"]["signature_def"]
    classify = next(
        k for k, v in signatures.items() if v["method_name"] == "tensorflow/serving/classify"
    )
    regress = next(
        k
        for k, v in signatures.items()
        if v["method_name"] == "tensorflow/serving/regress" and "x_to_y" in k
    )
    reply = post(
        server,
        "/v1/models/half_plus_two:classify",
        {"signature_name": classify, "examples": [{"x": 1.0}, {"x": 2.0}]},
    )
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert len(results) == 2 and all(len(r) == 1 for r in results)
    reply = post(
        server,
        "/v1/models/half_plus_two:regress",
        {"signature_name": regress, "examples": [{"x": 1.0}, {"x": 2.0}]},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"results": [2.5, 3.0]}


def test_metadata_shape(server):
    reply = requests.get(f"{server.rest}/v1/models/half_plus_two/versions/123/metadata", timeout=10)
    assert reply.status_code == 200
    doc = reply.json()
    assert doc["model_spec"] == {"name": "half_plus_two", "signature_name": "", "version": "123"}
    default = doc["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert "x" in default["inputs"] and "y" in default["outputs"]


def test_tf2_and_keras_exports(server):
    assert post(server, "/v1/models/tf2:predict", {"instances": [1.0, 2.0]}).json() == {
        "predictions": [2.5, 3.0]
    }
    meta = requests.get(f"{server.rest}/v1/models/keras/metadata", timeout=10).json()
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    ((_alias, info),) = sig["inputs"].items()
    width = int(info["tensor_shape"]["dim"][-1]["size"])
    reply = post(server, "/v1/models/keras:predict", {"instances": [[0.5] * width]})
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["predictions"]) == 1


def test_multi_input_row_and_columnar(server):
    rows = {"instances": [{"a": [1.0, 2.0], "b": 3}, {"a": [3.0, 4.0], "b": 5}]}
    reply = post(server, "/v1/models/multi_io:predict", rows)
    assert reply.status_code == 200, reply.text
    predictions = reply.json()["predictions"]
    assert len(predictions) == 2 and isinstance(predictions[0], dict)
    cols = {"inputs": {"a": [[1.0, 2.0], [3.0, 4.0]], "b": [3, 5]}}
    reply = post(server, "/v1/models/multi_io:predict", cols)
    assert reply.status_code == 200, reply.text
    outputs = reply.json()["outputs"]
    assert isinstance(outputs, dict)
    for name, value in outputs.items():
        row_values = [p[name] for p in predictions]
        assert value == row_values
    bytes_outputs = [k for k in outputs if k.endswith("_bytes")]
    for key in bytes_outputs:
        assert all(isinstance(v, dict) and set(v) == {"b64"} for v in outputs[key])


def test_string_input_b64_and_plain(server):
    plain = post(server, "/v1/models/strings:predict", {"instances": ["hello"]})
    b64 = post(
        server,
        "/v1/models/strings:predict",
        {"instances": [{"b64": base64.b64encode(b"hello").decode()}]},
    )
    assert plain.status_code == 200, plain.text
    assert plain.json() == b64.json()


def test_nan_and_infinity_tokens_in_and_out(server):
    reply = post(server, "/v1/models/half_plus_two:predict", b'{"instances": [NaN, Infinity]}')
    assert reply.status_code == 200
    assert "NaN" in reply.text and "Infinity" in reply.text
    values = json.loads(reply.text)["predictions"]
    assert math.isnan(values[0]) and values[1] == math.inf


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "JSON Parse error: The document is empty"),
        (b"{not json", "JSON Parse error"),
        (b'{"foo": 1}', "Missing 'inputs' or 'instances' key"),
        (b'{"instances": []}', "No values in 'instances' array"),
        (b'{"instances": ["a"]}', "not of expected type: float"),
        (b'{"instances": [[1.0], [1.0, 2.0]]}', "Expecting tensor size: 1 but got: 2"),
        (b'{"inputs": [[1.0], [1.0, 2.0]]}', "Encountered list at unexpected size"),
        (
            b'{"signature_name": "nope", "instances": [1.0]}',
            'Serving signature name: "nope" not found in signature def',
        ),
        (
            b'{"signature_name": 3, "instances": [1.0]}',
            "'signature_name' key must be a string value",
        ),
    ],
)
def test_bad_predict_requests_are_400_with_json(server, body, fragment):
    reply = post(server, "/v1/models/half_plus_two:predict", body)
    assert reply.status_code == 400
    assert fragment in reply.json()["error"]


def test_int_tensor_rejects_float(server):
    reply = post(
        server, "/v1/models/multi_io:predict", {"instances": [{"a": [1.0, 2.0], "b": 1.5}]}
    )
    assert reply.status_code == 400
    assert "error" in reply.json()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/models", 400),
        ("POST", "/v1/models/half_plus_two/metadata", 400),
        ("GET", "/v1/models/half_plus_two:predict", 400),
        ("GET", "/v1/models/half_plus_two/versions/abc", 400),
        ("GET", "/v2/models/x", 404),
    ],
)
def test_malformed_urls(server, method, path, status):
    reply = requests.request(method, f"{server.rest}{path}", timeout=10)
    assert reply.status_code == status


def test_concurrent_predictions_each_get_their_own_answer(server):
    def one(i: int):
        reply = post(server, "/v1/models/half_plus_two:predict", {"instances": [float(i)]})
        return reply.json()["predictions"][0]

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(200)))
    assert results == [0.5 * i + 2.0 for i in range(200)]


def test_server_survives_bad_requests(server):
    for body in (b"\xff\xfe", b"[" * 10000, b'{"instances": [' + b"1," * 5000 + b"1]}"):
        post(server, "/v1/models/half_plus_two:predict", body)
    assert server.proc.poll() is None
    assert requests.get(f"{server.rest}/v1/models/half_plus_two", timeout=10).status_code == 200
