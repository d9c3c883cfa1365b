"""The multi-model API on falcon's test client against a real model server: load, list and
page, get, invoke (with the model's own code or without), unload, and the answers in the AWS
container's words."""

from __future__ import annotations

import shutil
from urllib.parse import quote

import pytest

HANDLER = """
import json


def handler(data, context):
    return json.dumps({"handled": json.loads(data.read()), "model": context.model_name}), None
"""


@pytest.fixture
def api(make_app, empty_tfs_server, small_models, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(small_models / "half_plus_two", models / "plain")
    shutil.copytree(small_models / "half_plus_two", models / "coded")
    (models / "coded" / "code").mkdir()
    (models / "coded" / "code" / "inference.py").write_text(HANDLER)
    (models / "nothing").mkdir()
    return make_app(empty_tfs_server, multi_model=True)


def load(api, name: str, url: str):
    return api.simulate_post("/models", json={"model_name": name, "url": url})


def invoke(api, name: str, body: str = '{"instances": [1.0, 2.0]}'):
    return api.simulate_post(
        f"/models/{quote(name, safe='')}/invoke",
        body=body,
        headers={"Content-Type": "application/json"},
    )


def test_load_invoke_get_and_unload(api, empty_tfs_server):
    reply = load(api, "first", "plain")
    assert reply.status_code == 200, reply.text
    assert reply.json["success"] == (
        f"Successfully loaded model first, listening on rest port {empty_tfs_server.rest_port} "
        f"and grpc port {empty_tfs_server.grpc_port}."
    )
    assert reply.json["modelName"] == "first" and reply.json["modelUrl"].endswith("/plain")
    reply = invoke(api, "first")
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [2.5, 3.0]}
    reply = api.simulate_get("/models/first")
    assert reply.json["modelName"] == "first"
    reply = api.simulate_delete("/models/first")
    assert reply.json == {"success": "Successfully unloaded model first."}
    for reply in (api.simulate_get("/models/first"), invoke(api, "first")):
        assert reply.status_code == 404
        assert reply.json["error"] == "Model first is not loaded yet."


def test_a_model_with_its_own_code_and_an_opaque_name(api):
    name = "team a/model 1"
    assert load(api, name, "coded").status_code == 200
    reply = invoke(api, name, '{"x": 1}')
    assert reply.status_code == 200, reply.text
    assert reply.json["handled"] == {"x": 1}
    assert reply.json["model"].startswith("mme-")  # the model server's name of it
    assert load(api, "plain", "plain").status_code == 200
    assert invoke(api, "plain").json == {"predictions": [2.5, 3.0]}  # no code: built-in


def test_a_second_load_of_a_name_is_409(api):
    assert load(api, "twice", "plain").status_code == 200
    reply = api.simulate_post(
        "/models", json={"model_name": "twice", "url": "plain"}, headers={"X-Request-Id": "r-1"}
    )
    assert reply.status_code == 409
    assert reply.json == {"error": "Model twice is already loaded.", "request_id": "r-1"}


def test_a_url_without_a_model_is_404(api):
    reply = load(api, "none", "nothing")
    assert reply.status_code == 404
    assert reply.json["error"] == "Could not find valid base path nothing for servable none"


def test_the_list_pages_in_name_order(api):
    for name in ("c", "a", "b"):
        assert load(api, name, "plain").status_code == 200
    reply = api.simulate_get("/models", params={"limit": "2"})
    assert [m["modelName"] for m in reply.json["models"]] == ["a", "b"]
    token = reply.json["nextPageToken"]
    reply = api.simulate_get("/models", params={"limit": "2", "next_page_token": token})
    assert [m["modelName"] for m in reply.json["models"]] == ["c"]
    assert "nextPageToken" not in reply.json
    for limit in ("0", "x", "1001"):
        reply = api.simulate_get("/models", params={"limit": limit})
        assert reply.status_code == 400 and "limit must be" in reply.json["error"]


@pytest.mark.parametrize(
    ("body", "query", "words"),
    [
        ("{}", "", "Missing model_name, url in the load request"),
        ('{"model_name": 1, "url": "plain"}', "", "model_name and url must be strings"),
        ("[1]", "", "Expected a JSON object"),
        ("{", "", "The request body is not valid JSON"),
    ],
)
def test_bad_load_requests_are_400(api, body, query, words):
    reply = api.simulate_post("/models", body=body, query_string=query)
    assert reply.status_code == 400 and words in reply.json["error"]


def test_a_load_may_name_the_model_in_the_query_string(api):
    reply = api.simulate_post("/models", query_string="model_name=q&url=plain")
    assert reply.status_code == 200, reply.text
    assert api.simulate_get("/models/q").json["modelName"] == "q"


def test_methods_each_route_does_not_answer_are_405(api):
    reply = api.simulate_put("/models/m")
    assert reply.status_code == 405 and reply.headers["Allow"] == "GET, HEAD, DELETE"
    reply = api.simulate_get("/models/m/invoke")
    assert reply.status_code == 405 and reply.headers["Allow"] == "POST"


@pytest.mark.parametrize("name", ["\ud800", "a\udcffb", "\udfff"])
def test_a_name_that_cannot_be_written_out_is_400_and_registers_nothing(api, name):
    """A lone surrogate is valid JSON but no UTF-8: refused before anything is registered,
    so the listing keeps answering (it answered 500 for good)."""
    escaped = name.encode("unicode_escape").decode()  # "\\ud800": JSON's escape of it
    body = '{"model_name": "' + escaped + '", "url": "plain"}'
    reply = api.simulate_post("/models", body=body, headers={"X-Request-Id": "r-2"})
    assert reply.status_code == 400, reply.text
    assert reply.json == {
        "error": "model_name must be valid Unicode (no lone surrogates)",
        "request_id": "r-2",
    }
    reply = api.simulate_get("/models")
    assert reply.status_code == 200 and reply.json == {"models": []}


def test_errors_show_no_path_of_the_model_directory(api, tmp_path):
    root = str(tmp_path / "models")
    for url in ("/etc", "nothing", "../x", "plain/1"):
        reply = load(api, "p", url)
        assert reply.status_code in (400, 404) and "request_id" in reply.json, reply.text
        assert root not in reply.text, reply.text
    reply = load(api, "p", "/" + "u" * 1_000_000)  # never echoed whole
    assert reply.status_code == 400 and len(reply.json["error"]) < 2100, reply.text[:300]


def test_a_symlink_out_of_the_model_directory_is_400_and_loads_nothing(api, tmp_path, small_models):
    """A url whose model, a version of it, or a file of a version is a link leading outside
    the model directory is refused (it loaded a model from anywhere); links that stay
    inside are fine."""
    models = tmp_path / "models"
    outside = tmp_path / "elsewhere"
    shutil.copytree(small_models / "half_plus_two", outside / "model")
    (models / "m5").mkdir()
    (models / "m5" / "half_plus_three").symlink_to(outside / "model")
    (models / "v").mkdir()
    (models / "v" / "123").symlink_to(outside / "model" / "123")
    shutil.copytree(small_models / "half_plus_two", models / "f")
    variables = models / "f" / "123" / "variables"
    shutil.rmtree(variables)
    variables.symlink_to(outside / "model" / "123" / "variables")
    (models / "inside").mkdir()
    (models / "inside" / "linked").symlink_to(models / "plain")
    for url in ("m5", "v", "f"):
        reply = load(api, url, url)
        assert reply.status_code == 400, reply.text
        assert "links to a path outside the model directory" in reply.json["error"]
        assert str(tmp_path) not in reply.text
    assert api.simulate_get("/models").json == {"models": []}
    assert load(api, "inside", "inside").status_code == 200


def test_ping_says_whether_every_model_server_instance_is_up(api, make_app):
    """A multi-model /ping answers from what the service knows of the instances (it never
    waits for a model server busy loading, nor reads its metrics page)."""
    assert api.simulate_get("/ping").status_code == 200
    down = make_app(None, multi_model=True, rest_ports=[closed_port()])
    reply = down.simulate_get("/ping", headers={"X-Request-Id": "r-3"})
    assert reply.status_code == 503
    assert reply.json == {
        "error": "Not ready: model server instance 0 is not answering",
        "request_id": "r-3",
    }


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_name_whose_percent_encoding_is_no_utf8_is_a_400_not_another_name(api):
    """%FF decodes to no character: the name is refused, not turned into U+FFFD silently."""
    for reply in (
        api.simulate_post("/models", query_string="model_name=q%FF&url=plain"),
        api.simulate_get("/models/q%FF"),
        api.simulate_post("/models/q%FF/invoke", body="{}"),
        api.simulate_delete("/models/q%FF"),
    ):
        assert reply.status_code == 400, reply.text
        assert "not valid UTF-8" in reply.json["error"]
    assert api.simulate_get("/models").json == {"models": []}
