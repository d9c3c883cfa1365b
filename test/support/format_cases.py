"""The format rules of POST /invocations (and multi-model invoke) as one table of cases.

Each case is a request (Content-Type x Accept x body, for a model, with custom attributes) and
the one answer every path must give: status, Content-Type and body (exact bytes for a success;
for an error its JSON `{"error": message, "request_id": id}` with the exact message, or a part
of a model server's message, which every path must then give alike).
test/integration/test_format_conformance.py runs every case on every path: the njs fast path
(which hands some bodies to the Python service: still the fast path to the user), a user-code
path whose handlers leave the conversion to the built-in formats, multi-model invoke, and, for
the binary formats, the gRPC tensor path (`grpc=True`: the built-in paths send the payload as
Predict tensors; the user-code path sends the same payload by REST). The Case type and the
builders are format_case_builders.py's; answer_cases.py holds model server answers no model
here gives. The format table of docs/architecture.md summarises these rules.

Models (example_models): `half_plus_three` (y = 0.5x + 3, versions 123 and 124; regress and
classify signatures), `strings` (text -> length in bytes), `examples` (serialized tf.Example
with float `x` -> 0.5x + 2) and `formats` (x -> f32, f64, flag, i64, ratio, raw_bytes, text;
signatures `text`, `bytes`, `grid`; see example_models/formats.py).
"""

from __future__ import annotations

import numpy as np

from format_case_builders import (
    CSV,
    FORMATS_BODY,
    FORMATS_CSV,
    FORMATS_JSON,
    FORMATS_LINES,
    HP3,
    HP3_ROWS,
    JSON,
    JSONL,
    NOT_ACCEPTABLE,
    Case,
    empty_body_cases,
    example,
    fail,
    framed,
    model_error,
    npy,
    ok,
)
from sagemaker_serving.config.body_formats import JSON_LINES_NAMES  # each name on every path

# ----- the table -------------------------------------------------------------------------------


def content_type_cases() -> list[Case]:
    """Every accepted name (case and parameters ignored), none, curl's default, and 415."""
    cases = [
        ok(f"json-as-{ct}", "[[1.0, 2.0], [5.0, 10.0]]", HP3_ROWS, content_type=ct)
        for ct in (
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            None,
            "application/x-www-form-urlencoded",
            "APPLICATION/X-WWW-FORM-URLENCODED; charset=UTF-8",
        )
    ]
    cases += [
        ok(f"jsonlines-as-{ct}", "1.0\n2.0\n\n5.0\n", HP3, content_type=ct)
        for ct in (*JSON_LINES_NAMES, "Application/X-NDJSON; charset=utf-8")
    ]
    cases += [
        ok(f"csv-as-{ct}", "1.0\n2.0\n5.0\n", HP3, content_type=ct)
        for ct in ("text/csv", "Text/CSV; charset=utf-8", 'text/csv; charset="utf-8"')
    ]
    cases += [
        fail(f"unsupported-{ct}", "1.0", 415, f"Unsupported Media Type: {ct}", content_type=ct)
        for ct in ("text/plain", "application/xml; charset=utf-8", "image/png", "multipart/x")
    ]
    return cases


def accept_cases() -> list[Case]:
    """Every Accept form: none, wildcards, each type, q-values (q=0 excluded), 406."""
    body = "[[1.0, 2.0], [5.0, 10.0]]"
    lines = "[3.5, 4.0]\n[5.5, 8.0]\n"
    rows = "3.5,4.0\n5.5,8.0\n"
    chosen = {
        None: (JSON, HP3_ROWS),
        "": (JSON, HP3_ROWS),
        "*/*": (JSON, HP3_ROWS),
        "*": (JSON, HP3_ROWS),
        "application/*": (JSON, HP3_ROWS),
        "application/json": (JSON, HP3_ROWS),
        "APPLICATION/JSON; charset=utf-8": (JSON, HP3_ROWS),
        "text/csv": (CSV, rows),
        "text/*": (CSV, rows),
        "Text/CSV; header=absent": (CSV, rows),
        "text/csv;q=0.5, application/json": (JSON, HP3_ROWS),
        "application/json;q=0.1, text/csv": (CSV, rows),
        "application/json;q=0, */*": (JSONL, lines),
        "application/json;q=0, application/*": (JSONL, lines),
        "text/csv;q=0, */*": (JSON, HP3_ROWS),
        "text/csv;q=0.8, application/x-ndjson;q=0.9": ("application/x-ndjson", lines),
        "text/csv; Q=0.9 , application/jsons ; q=0.8": (CSV, rows),
        'text/csv;q="0.9", application/json;q=0.8': (CSV, rows),
        "application/jsonlines, text/csv": (JSONL, lines),
        "text/csv, application/jsonlines": (CSV, rows),
        "image/png, text/csv;q=0.2": (CSV, rows),
        "application/json;q=2, text/csv;q=0.1": (CSV, rows),  # q beyond 1: not acceptable
        "application/json;q=abc, text/*": (CSV, rows),
        ",, ,application/jsonlines": (JSONL, lines),
    }
    cases = [
        ok(f"accept-{accept!r}", body, expected, accept=accept, response_type=ctype)
        for accept, (ctype, expected) in chosen.items()
    ]
    cases += [
        ok(f"accept-{name}", body, lines, accept=name, response_type=name)
        for name in JSON_LINES_NAMES
    ]
    cases += [
        fail(
            f"not-acceptable-{accept!r}",
            body,
            406,
            f'Not Acceptable: "{accept}" {NOT_ACCEPTABLE}',
            accept=accept,
        )
        for accept in (
            "image/png",
            "text/html, application/xml",
            "application/json;q=0",
            "*/*;q=0",
            "text/csv;q=0, text/*",
            "application/json;q=x",
            "application/jsonlines;q=0, application/json;q=0, text/csv;q=0",
        )
    ]
    return cases


def json_body_cases() -> list[Case]:
    """TF Serving requests pass through; lists of lists are instances; other values one."""
    return [
        ok("tfs-instances", '{"instances": [1.0, 2.0, 5.0]}', HP3),
        ok(
            "tfs-instances-after-signature",
            '{"signature_name": "serving_default", "instances": [1.0, 2.0, 5.0]}',
            HP3,
        ),
        ok("tfs-inputs", '{"inputs": {"x": [1.0, 2.0]}}', '{"outputs": [3.5,4.0]}'),
        ok("tfs-inputs-list", '{"inputs": [1.0, 2.0]}', '{"outputs": [3.5,4.0]}'),
        ok(
            "tfs-trailing-bytes-ignored",
            '{"instances": [1.0]} trailing',
            '{"predictions": [3.5]}',
        ),
        ok(
            "tfs-nan-tokens",
            '{"instances": [NaN, Infinity, -Infinity, 1.0]}',
            '{"predictions": [NaN, Infinity, -Infinity, 3.5]}',
        ),
        ok("tfs-after-bom", b'\xef\xbb\xbf{"instances": [1.0]}', '{"predictions": [3.5]}'),
        ok("list-of-lists", "[[1.0, 2.0], [5.0, 10.0]]", HP3_ROWS),
        ok("list-is-one-instance", "[1.0, 2.0]", '{"predictions": [[3.5, 4.0]]}'),
        ok("scalar", "2.0", '{"predictions": [4.0]}'),
        ok("scalar-padded", " \n 2.0 \n", '{"predictions": [4.0]}'),
        ok("object-is-one-instance", '{"x": 2.0}', '{"predictions": [4.0]}'),
        ok("nan-scalar", "NaN", '{"predictions": [NaN]}'),
        ok("json-lines-in-json", "1.0\n2.0\n\n5.0", HP3),
        ok("int-literals", "[[1, 2]]", '{"predictions": [[3.5, 4.0]]}'),
        model_error("mixed-list-is-one-instance", "[[1.0], 2.0]", 400, "incorrect level"),
        model_error("tfs-truncated", '{"instances": [1.0, ', 400, "JSON Parse error"),
        model_error("tfs-empty-instances", '{"instances": []}', 400, "No values in 'instances'"),
        fail(
            "malformed", '{"x": ', 400, "Malformed JSON: Expecting value: line 1 column 6 (char 5)"
        ),
        fail(
            "malformed-lines",
            "[1.0]\n[2.0",
            400,
            "Malformed JSON: Extra data: line 2 column 1 (char 6)",
        ),
        fail("empty", "", 400, "Empty request body: expected JSON"),
        fail("blank", " \r\n\t", 400, "Empty request body: expected JSON"),
        fail(
            "empty-no-content-type", "", 400, "Empty request body: expected JSON", content_type=None
        ),
    ]


def json_lines_cases() -> list[Case]:
    jl = {"content_type": JSONL}
    return [
        ok("jsonl-crlf-and-blanks", "\r\n1.0\r\n\r\n2.0\r\n", '{"predictions": [3.5, 4.0]}',
           **jl),
        ok("jsonl-arrays", "[1.0, 2.0]\n[5.0, 10.0]\n", HP3_ROWS, **jl),
        ok("jsonl-one-tfs-request", '{"instances": [1.0, 2.0, 5.0]}\n', HP3, **jl),
        ok("jsonl-objects", '{"x": 1.0}\n{"x": 2.0}', '{"predictions": [3.5, 4.0]}', **jl),
        ok("jsonl-nan", "NaN\n1.0\n-Infinity", '{"predictions": [NaN, 3.5, -Infinity]}', **jl),
        ok("jsonl-out", "1.0\n2.0\n5.0", "3.5\n4.0\n5.5\n", accept=JSONL, response_type=JSONL,
           **jl),
        ok("jsonl-strings", '"hello, world"\n"\\u00e9"', '{"predictions": [12, 2]}',
           model="strings", **jl),
        fail("jsonl-malformed-line", "1.0\n\n[2.0\n3.0", 400,
             "Malformed JSON Lines: line 3: Expecting ',' delimiter: line 1 column 5 (char 4)",
             **jl),
        *empty_body_cases("jsonl", JSONL, "\n \n\r\n", "JSON Lines"),
    ]  # fmt: skip


def csv_cases() -> list[Case]:
    c = {"content_type": CSV}
    return [
        ok("csv-one-column", "1.0\n2.0\n5.0", HP3, **c),
        ok("csv-columns", "1,2\n5,10\n", HP3_ROWS, **c),
        ok("csv-crlf-and-blanks", "1.0\r\n\r\n2.0\r\n5.0\r\n", HP3, **c),
        ok("csv-spaces", " 1.0 , 2.0 \n5.0,10.0", HP3_ROWS, **c),
        ok("csv-special-numbers", "nan\n-inf\n1", '{"predictions": [NaN, -Infinity, 3.5]}', **c),
        ok("csv-other-number-forms", "+1\n.5\n1e1", '{"predictions": [3.5, 3.25, 8.0]}', **c),
        ok("csv-header-present", "x\n1.0\n2.0\n", '{"predictions": [3.5, 4.0]}',
           content_type="text/csv; header=present"),
        ok("csv-numeric-header-present", "1,2\n5,10\n", '{"predictions": [[5.5, 8.0]]}',
           content_type="text/csv;header=present"),
        ok("csv-quoted-strings", '"hello, world"\n"say ""hi"""\n"a\nb"\n',
           '{"predictions": [12, 8, 3]}', model="strings", **c),
        ok("csv-text", "abc\nd e\n", '{"predictions": [3, 3]}', model="strings", **c),
        ok("csv-latin-1", b"caf\xe9\n", '{"predictions": [5]}', model="strings",
           content_type="text/csv; charset=latin-1"),
        ok("csv-out", "1.0\n2.0\n5.0", "3.5\n4.0\n5.5\n", accept=CSV, response_type=CSV, **c),
        model_error("csv-quoted-number-is-text", '"1.0"\n', 400, "is not of expected type: float",
                    **c),
        fail("csv-ragged", "1,2\n3\n", 400, "Malformed CSV: line 2 has 1 fields, expected 2", **c),
        *empty_body_cases("csv", CSV, "\r\n\n", "CSV rows"),
    ]  # fmt: skip


def output_cases() -> list[Case]:
    """Outputs of every kind (float32 needing 9 digits, float64, int64 beyond 2**53, bool,
    NaN/Infinity, strings to escape and quote, base64) in every format; columnar outputs;
    nested rows; classify and regress results."""
    f = {"model": "formats"}
    columnar = '{"inputs": [1.0, -2.0, 0.0]}'
    text_sig = '{"signature_name": "text", "instances": [1.0]}'
    bytes_sig = '{"signature_name": "bytes", "instances": [1.0, -2.0]}'
    grid_sig = '{"signature_name": "grid", "instances": [1.0, 2.0]}'
    grid_cols = '{"signature_name": "grid", "inputs": [1.0, 2.0]}'
    regress = '{"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]}'
    classify = '{"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]}'
    return [
        ok("formats-json", FORMATS_BODY, FORMATS_JSON, **f),
        ok("formats-jsonl", FORMATS_BODY, FORMATS_LINES, accept=JSONL, response_type=JSONL, **f),
        ok("formats-csv", FORMATS_BODY, FORMATS_CSV, accept=CSV, response_type=CSV, **f),
        ok(
            "formats-csv-from-csv",
            "1.0\n-2.0\n0\n",
            FORMATS_CSV,
            content_type=CSV,
            accept=CSV,
            response_type=CSV,
            **f,
        ),
        ok("formats-columnar-json", columnar, _columnar_json(), **f),
        ok(
            "formats-columnar-jsonl",
            columnar,
            FORMATS_LINES,
            accept=JSONL,
            response_type=JSONL,
            **f,
        ),
        ok("formats-columnar-csv", columnar, FORMATS_CSV, accept=CSV, response_type=CSV, **f),
        ok("text-json", text_sig, '{"predictions": ["x=1.0, \\"q\\"\\n"]}', **f),
        ok("text-jsonl", text_sig, '"x=1.0, \\"q\\"\\n"\n', accept=JSONL, response_type=JSONL, **f),
        ok("text-csv", text_sig, '"x=1.0, ""q""\n"\n', accept=CSV, response_type=CSV, **f),
        ok(
            "bytes-json",
            bytes_sig,
            '{"predictions": [{"b64": "MS4w"}, {"b64": "LTIuMA=="}]}',
            **f,
        ),
        ok(
            "bytes-jsonl",
            bytes_sig,
            '{"b64": "MS4w"}\n{"b64": "LTIuMA=="}\n',
            accept=JSONL,
            response_type=JSONL,
            **f,
        ),
        ok("bytes-csv", bytes_sig, "MS4w\nLTIuMA==\n", accept=CSV, response_type=CSV, **f),
        ok(
            "grid-json",
            grid_sig,
            '{"predictions": [[[1.0, -1.0], [0.333333343, 0.0]], '
            "[[2.0, -2.0], [0.666666687, 0.0]]]}",
            **f,
        ),
        ok(
            "grid-jsonl",
            grid_sig,
            "[[1.0, -1.0], [0.333333343, 0.0]]\n[[2.0, -2.0], [0.666666687, 0.0]]\n",
            accept=JSONL,
            response_type=JSONL,
            **f,
        ),
        ok(
            "grid-csv",
            grid_sig,
            "1.0,-1.0,0.333333343,0.0\n2.0,-2.0,0.666666687,0.0\n",
            accept=CSV,
            response_type=CSV,
            **f,
        ),
        ok(
            "grid-columnar-jsonl",
            grid_cols,
            "[[1.0,-1.0],[0.333333343,0.0]]\n[[2.0,-2.0],[0.666666687,0.0]]\n",
            accept=JSONL,
            response_type=JSONL,
            **f,
        ),
        ok("regress", regress, '{"results": [3.5, 4.0]}', attributes="tfs-method=regress"),
        ok(
            "regress-jsonl",
            regress,
            "3.5\n4.0\n",
            attributes="tfs-method=regress",
            accept=JSONL,
            response_type=JSONL,
        ),
        ok(
            "regress-csv",
            regress,
            "3.5\n4.0\n",
            attributes="tfs-method=regress",
            accept=CSV,
            response_type=CSV,
        ),
        ok(
            "classify",
            classify,
            '{"results": [[["", 3.5]], [["", 4.0]]]}',
            attributes="tfs-method=classify",
        ),
        ok(
            "classify-jsonl",
            classify,
            '[["", 3.5]]\n[["", 4.0]]\n',
            attributes="tfs-method=classify",
            accept=JSONL,
            response_type=JSONL,
        ),
        ok(
            "classify-csv",
            classify,
            ",3.5\n,4.0\n",
            attributes="tfs-method=classify",
            accept=CSV,
            response_type=CSV,
        ),
        model_error(
            "regress-rows-need-a-regress-signature",
            '{"x": 1.0}\n{"x": 2.0}',
            400,
            "No regression inputs found in SignatureDef",
            content_type=JSONL,
            attributes="tfs-method=regress",
        ),
        model_error(
            "classify-csv-rows-are-no-examples",
            "1.0\n2.0",
            400,
            "Example must be JSON object but got JSON Number",
            content_type=CSV,
            attributes="tfs-method=classify",
        ),
    ]


def _columnar_json() -> str:
    return (
        '{"outputs": {"f32": [0.333333343,-0.666666687,0.0],'
        '"f64": [0.33333333333333331,-0.66666666666666663,0.0],"flag": [true,false,false],'
        '"i64": [9007199254740994,9007199254740991,9007199254740993],'
        '"ratio": [Infinity,-Infinity,NaN],'
        '"raw_bytes": [{"b64": "MS4w"},{"b64": "LTIuMA=="},{"b64": "MC4w"}],'
        '"text": ["x=1.0, \\"q\\"\\n","x=-2.0, \\"q\\"\\n","x=0.0, \\"q\\"\\n"]}}'
    )


def routing_cases() -> list[Case]:
    """Custom attributes: versions, methods, bad values (the first bad one is named)."""
    quoted = '"latest" (expected a non-negative integer)'
    return [
        ok(
            "version-123",
            "[1.0, 2.0, 5.0]",
            '{"predictions": [[3.5, 4.0, 5.5]]}',
            attributes="tfs-model-version=123",
        ),
        ok("method-predict", "2.0", '{"predictions": [4.0]}', attributes="tfs-method=predict"),
        ok(
            "other-attributes-ignored",
            "2.0",
            '{"predictions": [4.0]}',
            attributes="foo=bar, tfs-unknown=1",
        ),
        model_error(
            "unknown-version",
            "1.0",
            404,
            "Servable not found for request: Specific(",
            attributes="tfs-model-version=999",
        ),
        fail(
            "bad-version",
            "1.0",
            400,
            f"Invalid tfs-model-version in X-Amzn-SageMaker-Custom-Attributes: {quoted}",
            attributes="tfs-model-version=latest",
        ),
        fail(
            "bad-method",
            "1.0",
            400,
            "Invalid tfs-method in X-Amzn-SageMaker-Custom-Attributes: "
            '"explain" (expected predict, classify or regress)',
            attributes="tfs-method=explain",
        ),
        fail(
            "bad-method-then-good",
            "1.0",
            400,
            "Invalid tfs-method in "
            'X-Amzn-SageMaker-Custom-Attributes: "x" (expected predict, classify or regress)',
            attributes="tfs-method=x, tfs-method=predict",
        ),
        fail(
            "bad-name",
            "1.0",
            400,
            "Invalid tfs-model-name in X-Amzn-SageMaker-Custom-Attributes: "
            '"no/slash" (expected letters, digits, ".", "_" or "-")',
            attributes="tfs-model-name=no/slash",
        ),
        # the header twice: refused on every path (njs would join them, the service read
        # the first, so one request reached different models by its content type)
        *[
            fail(
                f"custom-attributes-twice-{kind}",
                body,
                400,
                "Bad Request: X-Amzn-SageMaker-Custom-Attributes sent more than once "
                "(send one, with its attributes separated by commas)",
                content_type=content_type,
                attributes="tfs-model-version=123",
                repeated_attributes="tfs-model-name=nope, tfs-model-version=124",
            )
            for kind, body, content_type in (
                ("json", "1.0", JSON),
                ("csv-via-service", "1.0\n", "text/csv; header=absent"),
                ("npy", npy(np.array([1.0], np.float32)), "application/x-npy"),
            )
        ],
        # multi-model invoke takes the model from its URL: an unknown one is its own 404
        model_error(
            "unknown-model",
            "1.0",
            404,
            "Servable not found for request: Latest(nope)",
            attributes="tfs-model-name=nope",
            paths=("fast", "user"),
        ),
    ]


def precedence_cases() -> list[Case]:
    """Which fault answers when there are several: routing, then Content-Type, then the body,
    then the model server, then Accept (decided on the model's answer)."""
    bad_accept = {"accept": "image/png"}
    return [
        fail(
            "route-before-content-type",
            "1.0",
            400,
            "Invalid tfs-method in "
            'X-Amzn-SageMaker-Custom-Attributes: "x" (expected predict, classify or regress)',
            content_type="text/plain",
            attributes="tfs-method=x",
        ),
        fail(
            "content-type-before-accept",
            "1.0",
            415,
            "Unsupported Media Type: text/plain",
            content_type="text/plain",
            **bad_accept,
        ),
        fail("body-before-accept", "", 400, "Empty request body: expected JSON", **bad_accept),
        model_error(
            "model-before-accept",
            "1.0",
            404,
            "Servable not found for request: Specific(",
            attributes="tfs-model-version=999",
            **bad_accept,
        ),
        fail(
            "accept-on-the-answer",
            "1.0",
            406,
            f'Not Acceptable: "image/png" {NOT_ACCEPTABLE}',
            **bad_accept,
        ),
    ]


def binary_cases() -> list[Case]:
    """Images and raw bytes for a string input, .npy arrays, tf.Example records."""
    image, npy_type, tfex = "application/x-image", "application/x-npy", "application/x-tfexample"
    f32 = npy(np.array([1.0, 2.0, 5.0], np.float32))
    formats = npy(np.array([1.0, -2.0, 0.0], np.float32))
    no_bytes_input = (
        "Unsupported Media Type: {}: the model's signature has no DT_STRING input to take the "
        "raw bytes (inputs: x (DT_FLOAT)). Send JSON, or add a code/inference.py that converts "
        "the payload."
    )
    s = {"model": "strings"}
    e = {"model": "examples"}
    return [
        ok(
            "image-bytes",
            b"\xff\xd8hello",
            '{"predictions": [7]}',
            content_type=image,
            grpc=True,
            **s,
        ),
        ok(
            "octet-stream",
            b"hello",
            '{"predictions": [5]}',
            content_type="application/octet-stream",
            grpc=True,
            **s,
        ),
        ok(
            "image-csv",
            b"hello",
            "5\n",
            content_type="Application/X-Image",
            accept=CSV,
            response_type=CSV,
            grpc=True,
            **s,
        ),
        ok(
            "image-jsonl",
            b"hello",
            "5\n",
            content_type=image,
            accept="application/x-ndjson",
            response_type="application/x-ndjson",
            grpc=True,
            **s,
        ),
        fail(
            "image-empty",
            b"",
            400,
            "Empty request body for application/x-image",
            content_type=image,
            **s,
        ),
        fail(
            "image-without-string-input",
            b"hello",
            415,
            no_bytes_input.format(image),
            content_type=image,
        ),
        fail(
            "image-not-acceptable",
            b"hello",
            406,
            f'Not Acceptable: "text/html" {NOT_ACCEPTABLE}',
            content_type=image,
            accept="text/html",
            grpc=True,
            **s,
        ),
        ok("npy-float32", f32, HP3, content_type=npy_type, grpc=True),
        ok(
            "npy-int64-cast-by-json", npy(np.array([1, 2, 5], np.int64)), HP3, content_type=npy_type
        ),
        ok(
            "npy-0d",
            npy(np.float32(2.0)),
            '{"predictions": [4.0]}',
            content_type=npy_type,
            grpc=True,
        ),
        ok(
            "npy-formats-json",
            formats,
            FORMATS_JSON,
            content_type=npy_type,
            grpc=True,
            model="formats",
        ),
        ok(
            "npy-formats-jsonl",
            formats,
            FORMATS_LINES,
            content_type=npy_type,
            accept=JSONL,
            response_type=JSONL,
            grpc=True,
            model="formats",
        ),
        ok(
            "npy-formats-csv",
            formats,
            FORMATS_CSV,
            content_type=npy_type,
            accept=CSV,
            response_type=CSV,
            grpc=True,
            model="formats",
        ),
        ok(
            "npy-strings",
            npy(np.array(["ab", "cde"])),
            '{"predictions": [2, 3]}',
            content_type=npy_type,
            grpc=True,
            **s,
        ),
        model_error(
            "npy-not-npy",
            b"not an array",
            400,
            "Could not read application/x-npy body",
            content_type=npy_type,
        ),
        ok(
            "tfexample-bare",
            example(3.0),
            '{"predictions": [[3.5]]}',
            content_type=tfex,
            grpc=True,
            **e,
        ),
        ok(
            "tfexample-framed",
            framed(example(1.0), example(4.0), example(-2.0)),
            "[2.5]\n[4.0]\n[1.0]\n",
            content_type=tfex,
            accept=JSONL,
            response_type=JSONL,
            grpc=True,
            **e,
        ),
        ok(
            "tfrecord-names",
            framed(example(1.0)),
            '{"predictions": [[2.5]]}',
            content_type="application/tfrecord",
            grpc=True,
            **e,
        ),
        ok(
            "x-tfrecord-csv",
            framed(example(1.0), example(2.0)),
            "2.5\n3.0\n",
            content_type="application/x-tfrecord",
            accept=CSV,
            response_type=CSV,
            grpc=True,
            **e,
        ),
        model_error(
            "tfexample-unparsable",
            b"\x0a\x03bad",
            400,
            "Record 0 is not a serialized tf.train.Example: ",
            content_type=tfex,
            **e,
        ),
        fail(
            "tfexample-empty",
            b"",
            400,
            "Empty request body: expected a serialized tf.train.Example",
            content_type=tfex,
            **e,
        ),
    ]


def large_cases() -> list[Case]:
    """Answers of 200,000 rows in every format (each in one pass on every path)."""
    rows = 200_000
    body = '{"instances": [' + ", ".join(["[1.0, 2.0]"] * rows) + "]}"
    return [
        ok("large-json", body, '{"predictions": [' + ", ".join(["[3.5, 4.0]"] * rows) + "]}"),
        ok("large-jsonl", body, "[3.5, 4.0]\n" * rows, accept=JSONL, response_type=JSONL),
        ok("large-csv", body, "3.5,4.0\n" * rows, accept=CSV, response_type=CSV),
    ]


def all_cases() -> list[Case]:
    cases = [
        *content_type_cases(),
        *accept_cases(),
        *json_body_cases(),
        *json_lines_cases(),
        *csv_cases(),
        *output_cases(),
        *routing_cases(),
        *precedence_cases(),
        *binary_cases(),
        *large_cases(),
    ]
    names = [case.name for case in cases]
    duplicates = {name for name in names if names.count(name) > 1}
    assert not duplicates, duplicates
    return cases


CASES = all_cases()
