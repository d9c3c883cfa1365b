"""X-Amzn-SageMaker-Custom-Attributes: model, version and method, and the 400s."""

from __future__ import annotations

import pytest

from sagemaker_serving.errors import StatusError
from sagemaker_serving.service.routing import Route, parse_route


@pytest.mark.parametrize(
    ("header", "route"),
    [
        (None, Route("default")),
        ("", Route("default")),
        ("other=1, something", Route("default")),
        ("tfs-model-name=m", Route("m", model_given="m")),
        (
            " tfs-model-name = m.v_2-x , tfs-model-version=7 , tfs-method=regress",
            Route("m.v_2-x", "7", "regress", "m.v_2-x", "regress"),
        ),
        ("tfs-model-name=a,tfs-model-name=b", Route("b", model_given="b")),  # the last wins
        ("trace=1;tfs-model-name=m, id=tfs-", Route("m", model_given="m")),  # found as AWS does
        ("trace=tfs-1;tfs-model-name=m", Route("m", model_given="m")),
        ("tfs-method=classify", Route("default", method="classify", method_given="classify")),
    ],
)
def test_routes(header, route):
    assert parse_route(header, "default") == route


def test_paths_on_the_model_server():
    assert Route("m").path() == "/v1/models/m:predict"
    assert Route("m", "2", "classify").path() == "/v1/models/m/versions/2:classify"


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ("tfs-model-name=../x", "Invalid tfs-model-name"),
        ("tfs-model-name=", "Invalid tfs-model-name"),
        ("tfs-model-name=" + "a" * 256, "Invalid tfs-model-name"),
        ("tfs-model-version=-1", "(expected a non-negative integer)"),
        ("tfs-model-version=" + "9" * 20, "Invalid tfs-model-version"),
        ("tfs-method=delete", "(expected predict, classify or regress)"),
        ("tfs-model-name=ok,tfs-method=bad", "Invalid tfs-method"),
    ],
)
def test_bad_values_are_400_in_the_fast_paths_words(header, words):
    with pytest.raises(StatusError) as info:
        parse_route(header, "default")
    assert info.value.status == 400
    assert words in info.value.message
    assert "X-Amzn-SageMaker-Custom-Attributes" in info.value.message


def test_the_name_rule_is_the_settings_one():
    longest = "a" * 255
    assert parse_route(f"tfs-model-name={longest}", "d").model == longest
