"""tfs_model_server.options: what the parsed flags' values mean to the server."""

from __future__ import annotations

import pytest

from tfs_model_server.options import FlagError, ServerOptions, grpc_channel_arguments


def test_grpc_channel_arguments_are_key_value_pairs_with_integers_where_they_parse() -> None:
    assert grpc_channel_arguments("a=1, b=x,") == [("a", 1), ("b", "x")]
    with pytest.raises(FlagError, match="'novalue'"):
        grpc_channel_arguments("novalue")


def test_the_defaults_are_tensorflow_model_servers() -> None:
    options = ServerOptions()
    assert (options.port, options.rest_api_port, options.model_base_path) == (8500, 0, "")
