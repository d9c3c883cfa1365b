"""sagemaker_serving.formats.answers: TF Serving answers as JSON (as the model server wrote
them, on one line), JSON Lines or CSV, by their text. The answer table
(test/support/answer_cases.py) that the integration tests run through the service runs here
through the conversion itself."""

from __future__ import annotations

import numpy as np
import pytest

from answer_cases import ANSWER_CASES, AnswerCase
from format_helpers import spec, specs, tf_serving_inputs
from sagemaker_serving.config.body_formats import JSON_LINES_NAMES
from sagemaker_serving.formats.answers import NOT_AN_ANSWER, encode_response, one_line
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request import decode_request
from tfs_model_server.codec.responses import predict_response

PRETTY = b'{\n    "predictions": [\n        [1.0, NaN],\n        [Infinity, -Infinity]\n    ]\n}'


def converted(answer: bytes, accept: str) -> bytes | None:
    """The answer as `accept` asks, or None for a 502 (not a TF Serving answer)."""
    try:
        body, ctype = encode_response(answer, accept)
    except PayloadError as err:
        assert (err.status, err.message) == (502, NOT_AN_ANSWER)
        return None
    assert ctype == accept
    return body


@pytest.mark.parametrize("case", ANSWER_CASES, ids=lambda case: case.name)
def test_the_answer_table(case: AnswerCase):
    assert converted(case.answer, "application/json") == case.json
    assert converted(case.answer, "application/jsonlines") == case.json_lines
    assert converted(case.answer, "text/csv") == case.csv


ONE_LINE = b'{"predictions": [[1.0, NaN],[Infinity, -Infinity]]}'


def test_one_line_drops_each_newline_and_the_indentation_after_it():
    assert one_line(PRETTY) == ONE_LINE
    assert one_line(b'  {"a": "x\\ny"}\n') == b'  {"a": "x\\ny"}'  # an escaped one stays
    deep = b"[" + b"".join(b"\n" + b" " * n + b"1," for n in (0, 3, 4, 8, 32, 36)) + b"]"
    assert one_line(deep) == b"[1,   1,1,1,1,    1,]"  # 4-space levels, at most 8 of them


@pytest.mark.parametrize("accept", [None, "", "*/*", "application/*", "application/json"])
def test_json_is_tf_servings_text_on_one_line(accept):
    """As nginx passes a TF Serving request's answer on: every path answers alike."""
    assert encode_response(PRETTY, accept) == (ONE_LINE, "application/json")


@pytest.mark.parametrize("accept", [*JSON_LINES_NAMES, "Application/NDJSON; charset=utf-8"])
def test_json_lines_keep_each_predictions_text_and_answer_the_name_asked(accept):
    body, ctype = encode_response(PRETTY, accept)
    assert ctype == accept.split(";")[0].lower()
    assert body == b"[1.0, NaN]\n[Infinity, -Infinity]\n"


@pytest.mark.parametrize(
    ("answer", "lines", "rows"),
    [
        (b'{"predictions": [3.5, 9e+06, 1e-05]}', b"3.5\n9e+06\n1e-05\n", b"3.5\n9e+06\n1e-05\n"),
        (
            b'{"predictions": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}',
            b"[[1, 2], [3, 4]]\n[[5, 6], [7, 8]]\n",
            b"1,2,3,4\n5,6,7,8\n",
        ),
        (b'{"outputs": [[1.0,2.0],[3.0,4.0]]}', b"[1.0,2.0]\n[3.0,4.0]\n", b"1.0,2.0\n3.0,4.0\n"),
        (
            b'{"predictions": [{"label": "a,b", "p": [0.5, NaN], "k_bytes": {"b64": "AAE="}},'
            b' {"label": "say \\"hi\\"", "p": [Infinity, -Infinity], "k_bytes": {"b64": ""}}]}',
            b'{"label": "a,b", "p": [0.5, NaN], "k_bytes": {"b64": "AAE="}}\n'
            b'{"label": "say \\"hi\\"", "p": [Infinity, -Infinity], "k_bytes": {"b64": ""}}\n',
            b'"a,b",0.5,NaN,AAE=\n"say ""hi""",Infinity,-Infinity,\n',
        ),
    ],
)
def test_json_lines_and_csv_texts(answer, lines, rows):
    assert converted(answer, "application/jsonlines") == lines
    assert converted(answer, "text/csv") == rows


def test_columnar_outputs_are_one_row_per_index():
    tfs = b'{"outputs": {"a": [1, 2], "b": [[1.5, 2.5], [3.5, 4.5]]}}'
    assert converted(tfs, "application/jsonlines") == (
        b'{"a": 1,"b": [1.5, 2.5]}\n{"a": 2,"b": [3.5, 4.5]}\n'
    )
    assert converted(tfs, "text/csv") == b"1,1.5,2.5\n2,3.5,4.5\n"


@pytest.mark.parametrize(
    "tfs", [b'{"outputs": {"a": [1, 2], "b": 5}}', b'{"outputs": {"a": [1, 2], "b": [3]}}']
)
def test_columnar_outputs_of_other_shapes_are_one_row(tfs):
    value = tfs[len(b'{"outputs": ') : -1]
    assert converted(tfs, "application/jsonlines") == value + b"\n"


def test_from_tf_servings_writer_every_format_keeps_its_number_text():
    outputs = {"y": np.array([[1 / 3, np.nan], [3.0, np.inf]], np.float32)}
    tfs = predict_response(outputs, row_format=True)
    assert b"[0.333333343, NaN]" in encode_response(tfs, None)[0]
    assert converted(tfs, "application/jsonlines") == b"[0.333333343, NaN]\n[3.0, Infinity]\n"
    assert converted(tfs, "text/csv") == b"0.333333343,NaN\n3.0,Infinity\n"


def test_csv_in_nan_through_tf_serving_and_back():
    """CSV in with NaN -> TF Serving JSON -> CSV out keeps NaN/Infinity."""
    request = decode_request(b"NaN,1\n-inf,2\n", "text/csv", None)
    arrays, _ = tf_serving_inputs(request, specs(spec("x")))
    tfs = predict_response({"y": arrays["x"]}, row_format=True)
    assert converted(tfs, "text/csv") == b"NaN,1.0\n-Infinity,2.0\n"


@pytest.mark.parametrize("answer", [b'{"error": "x"}', b'{"predictions": ["a]}', b"<html>"])
def test_not_a_tf_serving_answer_is_a_502(answer):
    with pytest.raises(PayloadError) as info:
        encode_response(answer, "text/csv")
    assert (info.value.status, info.value.message) == (
        502,
        "The model server answered with a body that is not a TF Serving answer",
    )


def test_a_406_comes_before_the_answer_is_read():
    with pytest.raises(PayloadError) as info:
        encode_response(b"<html>", "image/png")
    assert info.value.status == 406
