"""core.errors: the status codes (numbers, gRPC codes, HTTP statuses) and the error constructors."""

from __future__ import annotations

import grpc
import pytest

from tfs_model_server import errors
from tfs_model_server.errors import Code, ServingError


def test_code_of_reads_the_code_an_exception_carries_never_its_words():
    import tensorflow as tf

    assert errors.code_of(tf.errors.NotFoundError(None, None, "gone")) is Code.NOT_FOUND
    exhausted = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating")
    assert errors.code_of(exhausted) is Code.RESOURCE_EXHAUSTED
    assert errors.code_of(MemoryError()) is Code.RESOURCE_EXHAUSTED
    assert errors.code_of(errors.invalid_argument("x")) is Code.INVALID_ARGUMENT
    assert errors.code_of(ValueError("not found: out of memory")) is Code.UNKNOWN


def test_codes_are_the_grpc_codes():
    assert [code.name for code in Code] == [code.name for code in grpc.StatusCode]
    for code in Code:
        assert code.grpc_code.value[0] == code.number


@pytest.mark.parametrize(
    ("code", "status"),
    [(Code.OK, 200), (Code.INVALID_ARGUMENT, 400), (Code.NOT_FOUND, 404), (Code.INTERNAL, 500)],
)
def test_http_status(code, status):
    assert code.http_status == status


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (errors.invalid_argument, Code.INVALID_ARGUMENT),
        (errors.not_found, Code.NOT_FOUND),
        (errors.failed_precondition, Code.FAILED_PRECONDITION),
        (errors.unimplemented, Code.UNIMPLEMENTED),
        (errors.unavailable, Code.UNAVAILABLE),
        (errors.deadline_exceeded, Code.DEADLINE_EXCEEDED),
        (errors.internal, Code.INTERNAL),
    ],
)
def test_constructors(make, code):
    error = make("the text")
    assert isinstance(error, ServingError)
    assert (error.code, error.message, str(error)) == (code, "the text", "the text")
    assert repr(error) == f"ServingError({code.name}, 'the text')"
