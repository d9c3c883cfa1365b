"""core.example_inputs: tensorflow.serving.Input as serialized tf.Examples."""

from __future__ import annotations

import pytest
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import input_pb2

from tfs_model_server.core.example_inputs import serialized_examples
from tfs_model_server.errors import Code, ServingError


def _example(name: str) -> example_pb2.Example:
    feature = feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[name.encode()]))
    return example_pb2.Example(features=feature_pb2.Features(feature={"name": feature}))


def test_an_example_list() -> None:
    request = input_pb2.Input()
    request.example_list.examples.extend([_example("a"), _example("b")])
    examples, context = serialized_examples(request)
    assert [example_pb2.Example.FromString(e) for e in examples] == [_example("a"), _example("b")]
    assert context is None


def test_an_example_list_with_its_context() -> None:
    request = input_pb2.Input()
    request.example_list_with_context.examples.append(_example("a"))
    request.example_list_with_context.context.CopyFrom(_example("ctx"))
    examples, context = serialized_examples(request)
    assert len(examples) == 1 and example_pb2.Example.FromString(context) == _example("ctx")


def test_no_examples() -> None:
    with pytest.raises(ServingError) as info:
        serialized_examples(input_pb2.Input())
    assert (info.value.code, info.value.message) == (Code.INVALID_ARGUMENT, "Input is empty.")
