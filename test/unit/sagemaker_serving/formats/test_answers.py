"""sagemaker_serving.formats.answers: TF Serving answers as JSON, JSON Lines or CSV, by
their text (the integration table, test/format_cases.py, runs the same rules on every path)."""

from __future__ import annotations

import numpy as np
import pytest

from sagemaker_serving.formats.answers import client_text, encode_response, negotiate, one_line
from sagemaker_serving.formats.payloads import PayloadError, decode_request
from tfs_model_server.codec.json_reader import loads
from tfs_model_server.codec.predict_request import predict_inputs
from tfs_model_server.codec.responses import predict_response
from tfs_model_server.core.tensor_spec import TensorSpec

PRETTY = b'{\n    "predictions": [\n        [1.0, NaN],\n        [Infinity, -Infinity]\n    ]\n}'


def test_one_line_drops_each_newline_and_its_indentation():
    assert one_line(PRETTY) == b'{"predictions": [[1.0, NaN],[Infinity, -Infinity]]}'
    assert one_line(b'  {"a": "x y"}\n') == b'{"a": "x y"}'


@pytest.mark.parametrize("accept", [None, "", "*/*", "application/*", "application/json"])
def test_json_is_tf_servings_text_on_one_line(accept):
    body, ctype = encode_response(PRETTY, accept)
    assert (body, ctype) == (
        b'{"predictions": [[1.0, NaN],[Infinity, -Infinity]]}\n',
        "application/json",
    )


@pytest.mark.parametrize(
    "accept",
    [
        "application/jsonlines",
        "application/jsons",
        "application/x-jsonlines",
        "application/json-lines",
        "application/x-ndjson",
        "Application/NDJSON; charset=utf-8",
    ],
)
def test_json_lines_keep_each_predictions_text_and_answer_the_name_asked(accept):
    body, ctype = encode_response(PRETTY, accept)
    assert ctype == accept.split(";")[0].lower()
    assert body == b"[1.0, NaN]\n[Infinity, -Infinity]\n"


@pytest.mark.parametrize(
    ("answer", "lines"),
    [
        (b'{"predictions": [3.5, 4.0, 9e+06, 1e-05]}', b"3.5\n4.0\n9e+06\n1e-05\n"),
        (b'{"predictions": [9007199254740993]}', b"9007199254740993\n"),  # int64 exact
        (
            b'{"predictions": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}',
            b"[[1, 2], [3, 4]]\n[[5, 6], [7, 8]]\n",
        ),
        (b'{"predictions": [[], []]}', b"[]\n[]\n"),
        (b'{"predictions": []}', b""),
        (b'{"outputs": [[1.0,2.0],[3.0,4.0]]}', b"[1.0,2.0]\n[3.0,4.0]\n"),
        (b'{"outputs": 3.5}', b"3.5\n"),
        (b'{"outputs": {"b64": "AAE="}}', b'{"b64": "AAE="}\n'),
        (b'{"predictions": ["a\\u001Fb", "\\u00e9"]}', b'"a\\u001Fb"\n"\\u00e9"\n'),
        (b'{"results": [[["cat", 0.75]], [["", 1.0]]]}', b'[["cat", 0.75]]\n[["", 1.0]]\n'),
    ],
)
def test_json_lines_texts(answer, lines):
    assert encode_response(answer, "application/jsonlines")[0] == lines


def test_columnar_outputs_are_one_row_per_index():
    tfs = b'{"outputs": {"a": [1, 2], "b": [[1.5, 2.5], [3.5, 4.5]]}}'
    assert encode_response(tfs, "application/jsonlines")[0] == (
        b'{"a": 1,"b": [1.5, 2.5]}\n{"a": 2,"b": [3.5, 4.5]}\n'
    )
    assert encode_response(tfs, "text/csv")[0] == b"1,1.5,2.5\n2,3.5,4.5\n"


@pytest.mark.parametrize(
    "tfs", [b'{"outputs": {"a": [1, 2], "b": 5}}', b'{"outputs": {"a": [1, 2], "b": [3]}}']
)
def test_columnar_outputs_of_other_shapes_are_one_row(tfs):
    value = tfs[len(b'{"outputs": ') : -1]
    assert encode_response(tfs, "application/jsonlines")[0] == value + b"\n"


@pytest.mark.parametrize(
    ("answer", "rows"),
    [
        (
            b'{"predictions": [{"label": "a,b", "p": [0.5, NaN], "k_bytes": {"b64": "AAE="}},'
            b' {"label": "say \\"hi\\"", "p": [Infinity, -Infinity], "k_bytes": {"b64": ""}}]}',
            b'"a,b",0.5,NaN,AAE=\n"say ""hi""",Infinity,-Infinity,\n',
        ),
        (b'{"predictions": [1, 2.5, true]}', b"1\n2.5\ntrue\n"),
        (
            b'{"results": [[["cat", 0.75], ["dog", 0.25]], [["", 1.0]]]}',
            b"cat,0.75,dog,0.25\n,1.0\n",
        ),
        (b'{"predictions": [[null, 1], null, "", [], ["x\\ny"]]}', b',1\n""\n""\n""\n"x\ny"\n'),
        (b'{"predictions": [{"b64": "QUJD"}, {"b64": "QQ=="}]}', b"QUJD\nQQ==\n"),
        (b'{"predictions": [[1.0, 2.0], [3.0, 4.0]]}', b"1.0,2.0\n3.0,4.0\n"),
        (b'{"predictions": [9007199254740993, 0.123456791]}', b"9007199254740993\n0.123456791\n"),
    ],
)
def test_csv_rows(answer, rows):
    body, ctype = encode_response(answer, "text/csv")
    assert (body, ctype) == (rows, "text/csv")


def test_from_tf_servings_writer_every_format_keeps_its_number_text():
    outputs = {"y": np.array([[1 / 3, np.nan], [3.0, np.inf]], np.float32)}
    tfs = predict_response(outputs, row_format=True)
    assert encode_response(tfs, None)[0] == (
        b'{"predictions": [[0.333333343, NaN], [3.0, Infinity]]}\n'
    )
    assert encode_response(tfs, "application/jsonlines")[0] == (
        b"[0.333333343, NaN]\n[3.0, Infinity]\n"
    )
    assert encode_response(tfs, "text/csv")[0] == b"0.333333343,NaN\n3.0,Infinity\n"


@pytest.mark.parametrize(
    ("accept", "ctype"),
    [
        ("text/csv, application/json", "text/csv"),
        ("application/json;q=0.5, text/csv", "text/csv"),
        ("text/csv;q=0.2, application/jsonlines;q=0.8", "application/jsonlines"),
        ("text/csv;q=0, */*", "application/json"),
        ("application/json;q=0, */*", "application/jsonlines"),
        ("application/json;q=0, application/*", "application/jsonlines"),
        ("image/png, text/*;q=0.1", "text/csv"),
        ("application/xml, Application/JSON; charset=utf-8", "application/json"),
        ("text/csv;q=1.0, text/*;q=0.1", "text/csv"),
        ("text/csv;Q=0.5, application/x-ndjson;q=0.6", "application/x-ndjson"),
        ("text/csv; q = 0.5 , application/json ; q=0.4", "text/csv"),
        ('text/csv;q="0.9", application/json;q=0.8', "text/csv"),
        ("application/jsons, application/jsonlines", "application/jsons"),
        ("*", "application/json"),
        (" , ,text/csv", "text/csv"),
    ],
)
def test_accept_negotiation(accept, ctype):
    assert negotiate(accept) == ctype


@pytest.mark.parametrize(
    "accept",
    [
        "image/png",
        "text/html, application/xml",
        "text/csv;q=0",
        "text/csv;q=2",
        "text/csv;q=abc",
        "text/csv;q=-1",
        "application/json;q=0, text/*;q=0, application/*;q=0",
    ],
)
def test_not_acceptable_406_echoes_the_header(accept):
    with pytest.raises(PayloadError) as info:
        negotiate(accept)
    assert info.value.status == 406
    assert info.value.message == (
        f'Not Acceptable: "{accept}" (supported: application/json, application/jsonlines, text/csv)'
    )


def test_client_text_is_valid_utf8_cut_and_quoted():
    assert client_text("\xff\xfe/x") == '"\ufffd\ufffd/x"'
    assert client_text("a" * 300) == '"' + "a" * 200 + '..."'


def test_csv_in_nan_through_tf_serving_and_back():
    """CSV in with NaN -> TF Serving JSON -> CSV out keeps NaN/Infinity."""
    request = decode_request(b"NaN,1\n-inf,2\n", "text/csv", None)
    specs = {"x": TensorSpec("x", "x:0", 1, None)}  # DT_FLOAT
    arrays, _ = predict_inputs(loads(request.body), specs)
    tfs = predict_response({"y": arrays["x"]}, row_format=True)
    assert encode_response(tfs, "text/csv")[0] == b"NaN,1.0\n-Infinity,2.0\n"


@pytest.mark.parametrize("answer", [b'{"error": "x"}', b'{"predictions": ["a]}', b"<html>"])
def test_not_a_tf_serving_answer_is_a_502(answer):
    with pytest.raises(PayloadError) as info:
        encode_response(answer, "text/csv")
    assert info.value.status == 502
    assert info.value.message == (
        "The model server answered with a body that is not a TF Serving answer"
    )
