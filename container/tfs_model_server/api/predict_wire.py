"""A serialized PredictRequest read without copying its tensors' values.

protobuf copies a bytes field twice on its way to numpy (into the parsed message, then into
the bytes object its getter returns), and TensorFlow's make_ndarray copies once more: a 1 GiB
x-npy request (an asynchronous endpoint's) would cost 4 GiB here. `read` parses the request
with every input's `tensor_content` cut out, and keeps those values as views of the received
bytes: numpy reads them in place (tensor_protos.to_ndarray).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from tensorflow.core.framework import tensor_pb2
from tensorflow_serving.apis import predict_pb2

_INPUTS = 2  # PredictRequest.inputs: map<string, TensorProto>, entries of key 1 and value 2
_TENSOR_CONTENT = 4  # TensorProto.tensor_content


@dataclass
class ReadPredict:
    """A PredictRequest without its inputs' tensor_content, and those values by input name."""

    message: predict_pb2.PredictRequest
    contents: dict[str, memoryview] = field(default_factory=dict)


def read(data: bytes) -> ReadPredict:
    """The request in `data` (raises DecodeError as protobuf's parser would)."""
    view = memoryview(data)
    rest = bytearray()  # every field but the inputs
    read_inputs: dict[str, tuple[bytearray, memoryview | None]] = {}
    for number, kind, start, value, end in _fields(view, 0, len(view)):
        if number == _INPUTS and kind == 2:
            name, tensor, content = _input(view, value, end)
            read_inputs[name] = (tensor, content)  # a repeated key: the last entry holds
        else:
            rest += view[start:end]
    message = predict_pb2.PredictRequest.FromString(bytes(rest))
    request = ReadPredict(message)
    for name, (tensor, content) in read_inputs.items():
        message.inputs[name].CopyFrom(tensor_pb2.TensorProto.FromString(bytes(tensor)))
        if content is not None:
            request.contents[name] = content
    return request


def _input(view: memoryview, start: int, end: int) -> tuple[str, bytearray, memoryview | None]:
    """A map entry's key, its TensorProto without tensor_content, and that content."""
    name, tensor, content = b"", bytearray(), None
    for number, kind, _, value, stop in _fields(view, start, end):
        if number == 1 and kind == 2:
            name = bytes(view[value:stop])
        elif number == 2 and kind == 2:  # a message field seen twice merges: its fields add up
            for inner, inner_kind, field_start, inner_value, inner_end in _fields(
                view, value, stop
            ):
                if inner == _TENSOR_CONTENT and inner_kind == 2:
                    content = view[inner_value:inner_end]  # a bytes field: the last one holds
                else:
                    tensor += view[field_start:inner_end]
    try:
        return name.decode(), tensor, content
    except UnicodeDecodeError:
        raise DecodeError("an inputs key is not UTF-8") from None


def _fields(view: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field in view[start:end]: its number, wire type, where it starts, where its value
    starts, and where it ends."""
    at = start
    while at < end:
        key, value = _varint(view, at, end)
        number, kind = key >> 3, key & 7
        if kind == 0:
            _, stop = _varint(view, value, end)
        elif kind == 1:
            stop = value + 8
        elif kind == 2:
            size, value = _varint(view, value, end)
            stop = value + size
        elif kind == 5:
            stop = value + 4
        else:
            raise DecodeError(f"wire type {kind} is not read here")
        if number == 0 or stop > end:
            raise DecodeError("truncated or invalid message")
        yield number, kind, at, value, stop
        at = stop


def _varint(view: memoryview, at: int, end: int) -> tuple[int, int]:
    """The varint at `at` and where it ends."""
    result = shift = 0
    while at < end and shift < 64:
        byte = view[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
    raise DecodeError("truncated or invalid varint")
