"""TF Serving's own REST tests, ported to our tfs-model-server over real HTTP.

Ports tensorflow_serving/model_servers/http_rest_api_handler_test.cc (9 TESTs: URL dispatch,
Predict/Regress/Classify, GetStatus, GetModelMetadata, error codes and messages) and
http_rest_api_util_test.cc (2 TESTs: ParseModelInfo for GET and POST) from the TF Serving
at commit 9d981c5c. Each C++ call
`handler_.ProcessRequest(method, uri, body)` becomes the same request over HTTP on 127.0.0.1;
test ids keep TF Serving's TEST names. The model is TF Serving's testdata
saved_model_half_plus_two_2_versions (y = 0.5x + 2), from test/support/tfs_testdata, and
served as the C++ fixture does: name saved_model_half_plus_two_2_versions, specific version 123,
label Version_Label -> 123.

ParseModelInfo has no HTTP surface of its own; its parsed name, version and label are observed
through the error a request for an unknown model or label answers, which names them. Sub-cases
already covered by test_model_server_rest.py or test/unit/tfs_model_server/api/test_rest_api.py
are left out (noted at each table).
"""

from __future__ import annotations

import http.client
import json

import pytest

from conftest import model_server
from tfs_testdata_dir import TESTDATA

MODEL = "saved_model_half_plus_two_2_versions"  # kTestModelName
VERSION = 123  # kTestModelVersion1
LABEL = "Version_Label"  # kTestModelVersionLabel
RESERVED = "%21%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D"
DECODED = "!#$%&'()*+,/:;=?@[]"
UINT64_MAX = 2**64 - 1

CONFIG = """
model_config_list {
  config {
    name: 'MODEL' base_path: 'ROOT/MODEL' model_platform: 'tensorflow'
    model_version_policy { specific { versions: VERSION } }
    version_labels { key: 'LABEL' value: VERSION }
  }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rest_conformance")
    config = tmp / "models.config"
    text = CONFIG.replace("ROOT", str(TESTDATA)).replace("MODEL", MODEL)
    config.write_text(text.replace("VERSION", str(VERSION)).replace("LABEL", LABEL))
    with model_server(
        [f"--model_config_file={config}"], tmp / "server.log", ready_model=MODEL
    ) as srv:
        yield srv


def send(server, method: str, path: str, body: str = "") -> tuple[int, str, bytes]:
    """One request with the path sent byte for byte: (status, Content-Type, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    try:
        conn.request(method, path, body=body.encode())
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Type", ""), reply.read()
    finally:
        conn.close()


def error_of(content: bytes) -> str:
    doc = json.loads(content)
    assert isinstance(doc, dict) and isinstance(doc.get("error"), str), content
    return doc["error"]


# ----- TEST_F(HttpRestApiHandlerTest, kPathRegex) --------------------------------------------
# The regex decides which paths reach the REST handler; over HTTP, a handled path is answered
# by the handler (always Content-Type: application/json), any other one is a bare 404.
@pytest.mark.parametrize(
    ("path", "handled"), [("/v1/models", True), ("/statuspage", False), ("/index", False)]
)
def test_kPathRegex(server, path: str, handled: bool) -> None:
    status, content_type, content = send(server, "GET", path)
    if handled:
        assert content_type == "application/json"
        assert "Missing model name" in error_of(content)
    else:
        assert status == 404


# ----- error answers: (method, path, body, HTTP status, text the error must contain) ----------
# A None text: the C++ test checks the status code only.
MALFORMED = "Malformed request"
NO_VERSION = "Failed to convert version"
FOO = "/v1/models/foo"
ONE = '{ "instances": [1] }'


def malformed(method: str, path: str) -> tuple[str, str, str, int, str]:
    """A request without a body answered 400 with `MALFORMED`."""
    return method, path, "", 400, MALFORMED


# fmt: off
ERRORS = {
    # TEST_F(HttpRestApiHandlerTest, UnsupportedApiCalls); all InvalidArgument (400). Left out,
    # covered: GET /v1/models ("Missing model name") and GET /v1/models/foo:predict.
    "UnsupportedApiCalls-GET-v1-foo": malformed("GET", "/v1/foo"),
    "UnsupportedApiCalls-POST-v1-foo": malformed("POST", "/v1/foo"),
    "UnsupportedApiCalls-GET-debug": malformed("GET", "/v1/models/debug/model_name"),
    "UnsupportedApiCalls-POST-v1-models": malformed("POST", "/v1/models"),
    "UnsupportedApiCalls-GET-version": malformed("GET", f"{FOO}/version/50:predict"),
    "UnsupportedApiCalls-POST-version": malformed("POST", f"{FOO}/version/50:regress"),
    "UnsupportedApiCalls-POST-HELLO": malformed("POST", f"{FOO}/versions/HELLO:regress"),
    "UnsupportedApiCalls-POST-uint64max":
        ("POST", f"{FOO}/versions/{UINT64_MAX}:regress", "", 400, NO_VERSION),
    "UnsupportedApiCalls-POST-metadata": malformed("POST", f"{FOO}/metadata"),
    "UnsupportedApiCalls-POST-label": malformed("POST", f"{FOO}/label/some_label:regress"),
    "UnsupportedApiCalls-POST-versions-labels":
        malformed("POST", f"{FOO}/versions/50/labels/some_label:regress"),
    "UnsupportedApiCalls-POST-versions-label":
        malformed("POST", f"{FOO}/versions/some_label:regress"),
    # TEST_F(HttpRestApiHandlerTest, PredictModelNameVersionErrors); NotFound (404). Left out,
    # covered: POST /v1/models/foo:predict.
    "PredictModelNameVersionErrors-foo-50": ("POST", f"{FOO}/versions/50:predict", ONE, 404, None),
    "PredictModelNameVersionErrors-name99":
        ("POST", f"/v1/models/{MODEL}99:predict", ONE, 404, None),
    # TEST_F(HttpRestApiHandlerTest, PredictRequestErrors); InvalidArgument (400). Left out,
    # covered: the empty document and {"instances": ["x", "y"]} ("not of expected type").
    "PredictRequestErrors-bad-json":
        ("POST", f"/v1/models/{MODEL}:predict", "instances = [1, 2]", 400,
         "JSON Parse error: Invalid value"),
    "PredictRequestErrors-nonexistent-label":
        ("POST", f"/v1/models/{MODEL}/labels/Version_Nonexistent:predict",
         '{ "instances": ["x", "y"] }', 400, "Unrecognized servable version label"),
    "PredictRequestErrors-signature-name-type":
        ("POST", f"/v1/models/{MODEL}:predict", '{ "signature_name": 100 }', 400,
         "'signature_name' key must be a string value."),
    # TEST_F(HttpRestApiUtilTest, TestParseModelInfoForGet) failure cases: /v1/foo,
    # foo:predict and foo/version/50:predict by GET are the UnsupportedApiCalls ones above.
    # TEST_F(HttpRestApiUtilTest, TestParseModelInfoForPost) failure cases not already above:
    "TestParseModelInfoForPost-version": malformed("POST", f"{FOO}/version/50:predict"),
    "TestParseModelInfoForPost-string": malformed("POST", f"{FOO}/versions/string:predict"),
    "TestParseModelInfoForPost-uint64max":
        ("POST", f"{FOO}/versions/{UINT64_MAX}:predict", "", 400, NO_VERSION),
}
# fmt: on


@pytest.mark.parametrize(
    ("method", "path", "body", "code", "text"),
    [pytest.param(*case, id=name) for name, case in ERRORS.items()],
)
def test_error_answers(server, method, path, body, code, text) -> None:
    status, content_type, content = send(server, method, path, body)
    assert status == code, content
    assert content_type == "application/json"
    message = error_of(content)
    if text is not None:
        assert text in message


# ----- ParseModelInfo: the decoded name, version and label, as the errors name them ----------
# The C++ test asserts the parsed fields; over HTTP they show in the error for an unknown model
# or label, whose text is TF Serving's (get_model_status_impl.cc, basic_manager.cc
# ServableRequest::DebugString, server_core.cc GetModelVersionForLabel).
BODY = '{"instances": [1.0]}'  # POST parses the body before it looks the model up
NAME = f"/v1/models/modelname{RESERVED}"  # model "modelname" + DECODED
NO_MODEL = "Could not find any versions of model modelname"
NO_LABEL = "Unrecognized servable version label: latest"
# fmt: off
PARSE_MODEL_INFO = {
    "TestParseModelInfoForGet-reserved-name": ("GET", NAME, 404, f"{NO_MODEL}{DECODED}"),
    "TestParseModelInfoForGet-version":
        ("GET", "/v1/models/modelname/versions/99", 404,
         "Could not find version 99 of model modelname"),
    "TestParseModelInfoForGet-label":
        ("GET", "/v1/models/modelname/labels/latest", 404, NO_MODEL),
    "TestParseModelInfoForGet-reserved-label":
        ("GET", f"/v1/models/modelname/labels/latest{RESERVED}", 404, NO_MODEL),
    "TestParseModelInfoForGet-metadata":
        ("GET", "/v1/models/modelname/labels/latest/metadata", 400, NO_LABEL),
    "TestParseModelInfoForGet-reserved-metadata":
        ("GET", f"{NAME}/labels/latest{RESERVED}/metadata", 400, f"{NO_LABEL}{DECODED}"),
    "TestParseModelInfoForPost-reserved-name":
        ("POST", f"{NAME}:predict", 404,
         f"Servable not found for request: Latest(modelname{DECODED})"),
    "TestParseModelInfoForPost-version":
        ("POST", "/v1/models/modelname/versions/99:predict", 404,
         "Servable not found for request: Specific(modelname, 99)"),
    "TestParseModelInfoForPost-label":
        ("POST", "/v1/models/modelname/labels/latest:predict", 400, NO_LABEL),
    "TestParseModelInfoForPost-reserved-label":
        ("POST", f"/v1/models/modelname/labels/latest{RESERVED}:predict", 400,
         f"{NO_LABEL}{DECODED}"),
    "TestParseModelInfoForPost-reserved-name-label":
        ("POST", f"{NAME}/labels/latest{RESERVED}:predict", 400, f"{NO_LABEL}{DECODED}"),
}
# fmt: on
@pytest.mark.parametrize(
    ("method", "path", "code", "error"),
    [pytest.param(*case, id=name) for name, case in PARSE_MODEL_INFO.items()],
)
def test_parse_model_info(server, method, path, code, error) -> None:
    status, _, content = send(server, method, path, BODY if method == "POST" else "")
    assert (status, error_of(content)) == (code, error)


# ----- successful answers: (method, path, body, the JSON answer) -----------------------------
LATEST = f"/v1/models/{MODEL}"
V123 = f"/v1/models/{MODEL}/versions/{VERSION}"
LABELLED = f"/v1/models/{MODEL}/labels/{LABEL}"
REGRESS = '{"signature_name": "regress_x_to_y", "examples": [ { "x": 80.0 } ] }'
OK = {"error_code": "OK", "error_message": ""}
STATUS_123 = {"model_version_status": [{"version": "123", "state": "AVAILABLE", "status": OK}]}
# fmt: off
ANSWERS = {
    # TEST_F(HttpRestApiHandlerTest, Predict)
    "Predict-latest":
        ("POST", f"{LATEST}:predict", '{"instances": [[1.0, 2.0], [3.0, 4.0]]}',
         {"predictions": [[2.5, 3.0], [3.5, 4.0]]}),
    "Predict-version":
        ("POST", f"{V123}:predict", '{"instances": [1.0, 2.0]}', {"predictions": [2.5, 3.0]}),
    "Predict-label":
        ("POST", f"{LABELLED}:predict", '{"instances": [1.0, 2.0]}',
         {"predictions": [2.5, 3.0]}),
    "Predict-signature-name":
        ("POST", f"{V123}:predict",
         '{"signature_name": "serving_default", "instances": [3.0, 4.0]}',
         {"predictions": [3.5, 4.0]}),
    "Predict-signature-name-columnar":
        ("POST", f"{V123}:predict",
         '{"signature_name": "serving_default", "inputs": [3.0, 4.0]}',
         {"outputs": [3.5, 4.0]}),
    # TEST_F(HttpRestApiHandlerTest, Regress)
    "Regress-latest": ("POST", f"{LATEST}:regress", REGRESS, {"results": [42]}),
    "Regress-version": ("POST", f"{V123}:regress", REGRESS, {"results": [42]}),
    "Regress-label": ("POST", f"{LABELLED}:regress", REGRESS, {"results": [42]}),
    # TEST_F(HttpRestApiHandlerTest, Classify)
    "Classify-latest":
        ("POST", f"{LATEST}:classify",
         '{"signature_name": "classify_x_to_y", "examples": [ { "x": 20.0 } ] }',
         {"results": [[["", 12]]]}),
    "Classify-label":
        ("POST", f"{LABELLED}:classify",
         '{"signature_name": "classify_x_to_y", "examples": [ { "x": 10.0 } ] }',
         {"results": [[["", 7]]]}),
    # TEST_F(HttpRestApiHandlerTest, GetStatus)
    "GetStatus-all-versions": ("GET", LATEST, "", STATUS_123),
    "GetStatus-version": ("GET", V123, "", STATUS_123),
    "GetStatus-label": ("GET", LABELLED, "", STATUS_123),
}
# fmt: on


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [pytest.param(*case, id=name) for name, case in ANSWERS.items()],
)
def test_answers(server, method, path, body, expected) -> None:
    status, content_type, content = send(server, method, path, body)
    assert (status, content_type) == (200, "application/json"), content
    assert json.loads(content) == expected


# ----- letter case: http_rest_api_util.cc's patterns are (?i), but http_rest_api_handler.cc's
# ProcessRequest compares the verb and the `metadata` subresource exactly -------------------
@pytest.mark.parametrize(
    ("method", "path", "code", "expected"),
    [
        pytest.param("POST", f"/V1/MODELS/{MODEL}:predict", 200, {"predictions": [2.5]}, id="path"),
        pytest.param(
            "POST",
            f"{LATEST}:PREDICT",
            400,
            {"error": f"Malformed request: POST {LATEST}:PREDICT"},
            id="verb",
        ),
        pytest.param("GET", f"{LATEST}/METADATA", 200, STATUS_123, id="metadata-is-status"),
    ],
)
def test_letter_case(server, method, path, code, expected) -> None:
    status, _, content = send(
        server, method, path, '{"instances": [1.0]}' if method == "POST" else ""
    )
    assert (status, json.loads(content)) == (code, expected)


# ----- TEST_F(HttpRestApiHandlerTest, GetModelMetadata) --------------------------------------
def test_GetModelMetadata(server) -> None:
    """The answer is TF Serving's saved_model_half_plus_two_2_versions_metadata.json."""
    expected = json.loads((TESTDATA / f"{MODEL}_metadata.json").read_text())
    status, content_type, content = send(server, "GET", f"/v1/models/{MODEL}/metadata")
    assert (status, content_type) == (200, "application/json"), content
    assert json.loads(content) == expected
