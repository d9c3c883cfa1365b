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
    return json.dumps({"handled": json.loads(data.read()), "model": context.model_name})
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
    reply = load(api, "twice", "plain")
    assert reply.status_code == 409
    assert reply.json == {"error": "Model twice is already loaded."}


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
