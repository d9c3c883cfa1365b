"""What handlers must return, checked where they return it."""

from __future__ import annotations

import io

import pytest

from sagemaker_serving.user_code import contract as handler_contract
from sagemaker_serving.user_code.contract import HandlerResultError


def input_handler(data, context):
    return {"instances": [1]}


@pytest.mark.parametrize(
    ("value", "body"),
    [("{}", b"{}"), (b"x", b"x"), (bytearray(b"y"), b"y"), (memoryview(b"z"), b"z")],
)
def test_an_input_handler_returns_a_string_or_bytes(value, body):
    assert handler_contract.request_body(value, input_handler) == body


def test_a_file_like_or_an_iterator_of_chunks_is_read_as_the_body():
    # what the AWS container's requests.post(data=...) sends: `return data` passes it on
    data = io.BytesIO(b'{"instances": [1]}')
    assert handler_contract.request_body(data, input_handler) == b'{"instances": [1]}'
    chunks = (part for part in ('{"instances": ', b"[1]}"))
    assert handler_contract.request_body(chunks, input_handler) == b'{"instances": [1]}'
    with pytest.raises(HandlerResultError, match="a streamed chunk was int"):
        handler_contract.request_body(iter([b"x", 1]), input_handler)


def test_any_other_request_body_names_the_handler_its_place_and_what_was_expected():
    with pytest.raises(HandlerResultError) as info:
        handler_contract.request_body({"instances": [1]}, input_handler)
    message = info.value.message
    where = f"test_contract.py, line {input_handler.__code__.co_firstlineno}"
    assert message.startswith(f"input_handler ({where}) returned dict")
    assert "{'instances': [1]}" in message and "expected a str (JSON) or bytes-like" in message
    assert "/" not in message.split(" returned ")[0]  # no folders
    assert info.value.status == 500


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (("body", "text/plain"), (b"body", "text/plain")),
        ([b"body", None], (b"body", None)),
    ],
)
def test_an_answer_is_a_body_and_content_type_pair(value, expected):
    assert handler_contract.answer(value, "output_handler") == expected


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1},
        42,
        None,
        ("body", 5),
        ({"a": 1}, "application/json"),
        ("a", "b", "c"),
        "bare",  # the AWS container unpacks two values: a bare body is no answer there either
        b"bare",
    ],
)
def test_any_other_answer_is_refused(value):
    with pytest.raises(HandlerResultError) as info:
        handler_contract.answer(value, "output_handler")
    assert info.value.message.startswith(f"output_handler returned {type(value).__name__}")
    assert "expected a (body, content_type) pair" in info.value.message


def test_a_long_value_is_cut_short():
    with pytest.raises(HandlerResultError) as info:
        handler_contract.answer(list(range(10_000)), "handler", "handler")
    assert len(info.value.message) < 200


def test_an_iterator_of_chunks_is_a_streamed_answer():
    chunks = iter([b"a", "b"])
    assert handler_contract.answer(chunks, "handler", "handler") == (chunks, None)
    pair = (iter(["x"]), "text/plain")
    assert handler_contract.answer(pair, "handler", "handler") == pair
    with pytest.raises(HandlerResultError, match="expected a"):
        handler_contract.answer((iter(["x"]), 5), "handler", "handler")


@pytest.mark.parametrize(
    "content_type",
    ["text/plain\r\nX-Injected: 1", "text/plain\n", "a\x00b", "text/plain; n=\u00e9", "\U0001f600"],
)
def test_a_content_type_that_is_no_header_value_is_refused(content_type):
    # uvicorn refused it when the answer started: a 502 "backend unavailable" (a line break) or
    # a bare 500 (a non-Latin-1 character), neither naming the handler
    for body in (b"x", iter([b"x"])):
        with pytest.raises(HandlerResultError) as info:
            handler_contract.answer((body, content_type), "handler", "handler")
        assert info.value.message.startswith("handler returned the content type ")
        assert "expected printable ASCII" in info.value.message and info.value.status == 500


def test_a_content_type_may_hold_parameters_and_tabs():
    value = (b"x", 'text/plain;\tcharset=utf-8; q="a b"')
    assert handler_contract.answer(value, "handler", "handler") == value
    assert handler_contract.answer((b"x", ""), "handler", "handler") == (b"x", None)
