"""The image under Serverless Inference's profile (serverless.py): JSON, CSV and a handler
whose requirements.txt is installed under /tmp, within a 4 MB payload limit."""

from __future__ import annotations

import json

import requests
from containers import running
from serverless import ENV, FOUR_MB, OPTIONS

from wheels import tiny_wheel

BODY = '{"instances": [1.0]}'
HANDLER = """
import json

import tinypkg  # code/requirements.txt, from code/wheelhouse


def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    doc = response.json()
    doc["tinypkg"] = tinypkg.VALUE
    return json.dumps(doc), "application/json"
"""


def _json_of_size(size: int) -> bytes:
    body = b'{"instances": [1.0, 2.0]}'
    return body + b" " * (size - len(body))


def test_a_plain_model_serves_json_and_csv_within_4_mb(engine, image, tmp_path):
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    with running(engine, image, tmp_path / "model", env=ENV, **OPTIONS) as container:
        url = f"{container.url}/invocations"
        reply = requests.post(url, data=_json_of_size(FOUR_MB), timeout=60)
        assert (reply.status_code, reply.json()) == (200, {"predictions": [3.5, 4.0]})
        csv = requests.post(url, data="1.0\n2.0\n", headers={"Content-Type": "text/csv"})
        assert (csv.status_code, csv.json()) == (200, {"predictions": [3.5, 4.0]})
        over = requests.post(url, data=_json_of_size(FOUR_MB + 1), timeout=60)
        assert over.status_code == 413
        assert over.json()["error"].endswith(f"over the limit of {FOUR_MB} bytes")
        code, user = container.exec("id", "-u")
        assert (code, user.strip()) == (0, "12345")
        assert container.stop() == 0


def test_a_handler_with_requirements_installs_them_under_tmp(engine, image, tmp_path):
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    code = tmp_path / "model" / "code"
    code.mkdir()
    tiny_wheel(code / "wheelhouse")
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    (code / "inference.py").write_text(HANDLER)
    with running(engine, image, tmp_path / "model", env=ENV, **OPTIONS) as container:
        reply = requests.post(f"{container.url}/invocations", data=BODY, timeout=60)
        assert reply.status_code == 200, reply.text
        assert json.loads(reply.content) == {"predictions": [3.5], "tinypkg": 42}
        assert container.stop() == 0
