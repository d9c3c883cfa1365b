"""A multi-model endpoint: SAGEMAKER_MULTI_MODEL=true, models under /opt/ml/models as SageMaker
unpacks them (/opt/ml/models/<name>/model/<version>/), loaded, invoked, listed and unloaded
through the documented /models API."""

from __future__ import annotations

import pytest
import requests
import user_code
from containers import running

import example_models as em

PREDICT = '{"instances": [1.0, 2.0]}'


@pytest.fixture(scope="module")
def mme(engine, image, tmp_path_factory):
    root = tmp_path_factory.mktemp("opt_ml_models")
    em.half_plus_three_tf1(root / "three" / "model", versions=(1,))
    em.half_plus_two_tf1(root / "two" / "model", version=1)
    user_code.write(root / "coded" / "model", {"code/inference.py": user_code.PLAIN_HANDLERS})
    em.half_plus_two_tf1(root / "coded" / "model", version=1)
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    with running(engine, image, root, env=env, mount_at="/opt/ml/models") as container:
        yield container


def load(url: str, name: str) -> requests.Response:
    body = {"model_name": name, "url": f"/opt/ml/models/{name}/model"}
    return requests.post(f"{url}/models", json=body, timeout=300)


def invoke(url: str, name: str) -> requests.Response:
    return requests.post(f"{url}/models/{name}/invoke", data=PREDICT, timeout=60)


def test_load_invoke_list_unload(mme):
    url = mme.url
    assert requests.get(f"{url}/ping", timeout=2).status_code == 200
    assert requests.get(f"{url}/models", timeout=10).json() == {"models": []}
    for name in ("three", "two", "coded"):
        reply = load(url, name)
        assert reply.status_code == 200, reply.text
    assert load(url, "three").status_code == 409
    assert invoke(url, "three").json() == {"predictions": [3.5, 4.0]}
    assert invoke(url, "two").json() == {"predictions": [2.5, 3.0]}
    assert invoke(url, "coded").json() == {"predictions": [2.5, 3.0]}  # through its inference.py
    listed = requests.get(f"{url}/models", headers={"Accept": "application/json"}, timeout=10)
    assert sorted(m["modelName"] for m in listed.json()["models"]) == ["coded", "three", "two"]
    got = requests.get(f"{url}/models/two", timeout=10).json()
    assert got == {"modelName": "two", "modelUrl": "/opt/ml/models/two/model"}
    assert requests.delete(f"{url}/models/two", timeout=120).status_code == 200
    assert invoke(url, "two").status_code == 404
    assert requests.get(f"{url}/models/two", timeout=10).status_code == 404
    assert invoke(url, "three").json() == {"predictions": [3.5, 4.0]}
    assert load(url, "two").status_code == 200  # loads again after the unload
    assert invoke(url, "two").json() == {"predictions": [2.5, 3.0]}


def test_a_missing_model_is_the_aws_containers_404_with_the_url_as_sent(mme):
    reply = load(mme.url, "absent")
    assert reply.status_code == 404, reply.text
    assert reply.json()["error"] == (
        "Could not find valid base path /opt/ml/models/absent/model for servable absent"
    )
