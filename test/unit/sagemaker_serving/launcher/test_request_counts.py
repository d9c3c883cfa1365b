"""launcher/request_counts.py: nginx's line per request read as (route, status, model,
seconds), the same for a line seen before (its route is cached)."""

from __future__ import annotations

import pytest

from sagemaker_serving.launcher.request_counts import counted

CASES = [
    (b"200 0.002 /invocations -", ("/invocations", 200, "m", 0.002)),
    (b"200 0.002 /invocations?x=1 tfs-model-name=other", ("/invocations", 200, "other", 0.002)),
    (b"400 0.001 /invocations tfs-model-name=a\\x22b", ("/invocations", 400, "", 0.001)),
    (b"200 0.010 /models/a%2Fb/invoke -", ("/invocations", 200, "a/b", 0.01)),
    (b"200 0.010 /models/a%2Fb -", ("/models", 200, "a/b", 0.01)),
    (b"200 0.000 /models -", ("/models", 200, "", 0.0)),
    (b"200 0.000 /ping -", ("/ping", 200, "", 0.0)),
    (b"404 0.000 /nope -", ("other", 404, "", 0.0)),
]


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_a_line_is_its_request(line, expected):
    assert counted(line, "m") == expected
    assert counted(line, "m") == expected  # again, from the cache
    slower = counted(line.replace(line.split(b" ")[1], b"1.5", 1), "m")
    assert slower == (*expected[:3], 1.5)  # the seconds are each line's own


def test_a_line_that_is_not_nginxs_is_none():
    assert counted(b"garbage", "m") is None
    assert counted(b"200 soon /ping -", "m") is None


def test_the_default_model_is_the_runs():
    assert counted(b"200 0.002 /invocations -", "two")[2] == "two"
