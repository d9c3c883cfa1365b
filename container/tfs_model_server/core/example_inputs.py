"""tensorflow.serving.Input (the examples of a classify, regress or multi-inference request,
from gRPC or a warmup record) as serialized tf.Examples."""

from __future__ import annotations

from tensorflow_serving.apis import input_pb2

from tfs_model_server.errors import invalid_argument


def serialized_examples(request_input: input_pb2.Input) -> tuple[list[bytes], bytes | None]:
    """(examples, context): each Example serialized; the context only for a list with one."""
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in request_input.example_list.examples], None
    if kind == "example_list_with_context":
        lst = request_input.example_list_with_context
        return [e.SerializeToString() for e in lst.examples], lst.context.SerializeToString()
    raise invalid_argument("Input is empty.")
