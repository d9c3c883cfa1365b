"""tfs_rest_json.model_version: the one bound of model versions (int64), read by our model
server (REST paths, version directories) and the SageMaker layer (routing, model discovery)."""

from __future__ import annotations

from tfs_model_server.core.manager import parse_version
from tfs_rest_json.model_version import MAX_MODEL_VERSION, MAX_VERSION_DIGITS, is_model_version


def test_the_bound_is_int64():
    assert MAX_MODEL_VERSION == 9223372036854775807
    assert MAX_VERSION_DIGITS == 19
    assert is_model_version(0) and is_model_version(MAX_MODEL_VERSION)
    assert not is_model_version(-1) and not is_model_version(MAX_MODEL_VERSION + 1)


def test_the_model_server_reads_version_directories_by_it():
    assert parse_version(str(MAX_MODEL_VERSION)) == MAX_MODEL_VERSION
    assert parse_version(str(MAX_MODEL_VERSION + 1)) is None
