"""What user code imports, as in the AWS container: code/lib, requirements.txt (ignored beside
lib), only a deliberate set of the container's packages (no pillow), and each multi-model
model's own lib (a user's own version of a package the service uses:
test_user_environments.py)."""

from __future__ import annotations

import textwrap

import pytest
import requests

from conftest import serve_stack

# The AWS container's test/resources/examples/test4 and test5: a module from code/lib, and
# pillow absent (with test4, pillow is listed in a requirements.txt beside lib).
AWS_EXAMPLE = """
import json

import requests

import dummy_module  # code/lib


def handler(data, context):
    print(dummy_module.__version__)
    try:
        import PIL  # noqa: F401
        raise Exception("pillow should not be installed")
    except ImportError:
        pass
    response = requests.post(context.rest_uri, data=_process_input(data, context))
    return _process_output(response, context)


def _process_input(data, context):
    if context.request_content_type == "application/json":
        d = data.read().decode("utf-8")
        return d if len(d) else ""
    if context.request_content_type == "text/csv":
        return json.dumps({"instances": [float(x) for x in data.read().decode("utf-8").split(",")]})
    raise ValueError("unsupported content type {}".format(context.request_content_type))


def _process_output(data, context):
    if data.status_code != 200:
        raise ValueError(data.content.decode("utf-8"))
    return data.content, context.accept_header
"""


def _aws_example(root, with_requirements: bool):
    models = root / "model"
    import example_models as em

    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    code = models / "code"
    (code / "lib" / "dummy_module").mkdir(parents=True)
    (code / "lib" / "dummy_module" / "__init__.py").write_text("__version__ = '0.1'\n")
    (code / "inference.py").write_text(textwrap.dedent(AWS_EXAMPLE))
    if with_requirements:  # would need the network; must not even be tried
        (code / "requirements.txt").write_text("Pillow\nno-such-package-anywhere==9.9\n")
    return models


@pytest.mark.parametrize("with_requirements", [True, False], ids=["lib+requirements", "lib"])
def test_the_aws_containers_lib_examples_run_unchanged(tmp_path, with_requirements):
    models = _aws_example(tmp_path, with_requirements)
    requests_of_both_kinds = (
        ('{"instances": [1.0, 2.0]}', "application/json"),
        ("1.0,2.0", "text/csv"),
    )
    with serve_stack(models, tmp_path) as server:
        for body, content_type in requests_of_both_kinds:
            reply = requests.post(
                f"{server.url}/invocations",
                data=body,
                headers={"Content-Type": content_type, "Accept": "application/json"},
                timeout=30,
            )
            assert reply.status_code == 200, reply.text
            assert reply.json() == {"predictions": [3.5, 4.0]}
        log = server.log()
    requirements = models / "code" / "requirements.txt"
    assert f"installing {requirements}" not in log
    if with_requirements:
        assert f"{requirements} is not installed: {models / 'code' / 'lib'} is there" in log


MODEL_WITH_LIB = """
import json

import shared_helper  # this model's code/lib


def handler(data, context):
    return json.dumps({"helper": shared_helper.VERSION}), "application/json"
"""


def test_each_multi_model_model_imports_its_own_lib(tmp_path):
    import example_models as em

    root = tmp_path / "models"
    for name, version in (("one", "1.0"), ("two", "2.0")):
        em.half_plus_three_tf1(root / name / "model", versions=(1,))
        code = root / name / "model" / "code"
        (code / "lib").mkdir(parents=True)
        (code / "lib" / "shared_helper.py").write_text(f"VERSION = {version!r}\n")
        (code / "inference.py").write_text(textwrap.dedent(MODEL_WITH_LIB))
    env = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_GUNICORN_WORKERS": "1"}
    run = tmp_path / "run"
    run.mkdir()
    with serve_stack(root, run, env) as server:
        for name in ("one", "two"):
            body = {"model_name": name, "url": str(root / name / "model")}
            reply = requests.post(f"{server.url}/models", json=body, timeout=120)
            assert reply.status_code == 200, reply.text
        for name, version in (("one", "1.0"), ("two", "2.0"), ("one", "1.0")):
            reply = requests.post(f"{server.url}/models/{name}/invoke", data="{}", timeout=30)
            assert reply.status_code == 200, reply.text
            assert reply.json() == {"helper": version}
