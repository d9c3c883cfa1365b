"""Model server answers no model here gives (null, irregular columns, exotic escapes and
numbers, non-answers), each with what every Accept makes of it: test_answer_conformance.py runs
them through the Python service from a stand-in model server, the formats' unit tests through
the conversion itself. A JSON answer is the model server's text as it wrote it, on one line
(as nginx passes a TF Serving request's answer on)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AnswerCase:
    """A model server's successful answer (its exact text) and what each Accept makes of it
    (None: a 502, the answer is no TF Serving answer)."""

    name: str
    answer: bytes
    json: bytes | None
    json_lines: bytes | None
    csv: bytes | None


def answer(name: str, text: str, lines: str | None, csv: str | None):
    """A case: JSON is the answer as the model server wrote it, whatever it holds, on one
    line (each newline and the 4-space indentation after it removed)."""

    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    return AnswerCase(
        name, text.encode(), re.sub(r"\n(?:    ){0,8}", "", text).encode(), enc(lines), enc(csv)
    )


ANSWER_CASES = [
    answer(
        "null",
        '{"predictions": [[null, 1.0], null]}',
        "[null, 1.0]\nnull\n",
        ',1.0\n""\n',
    ),
    answer("empty", '{"predictions": []}', "", ""),
    answer(
        "empty-rows",
        '{"predictions": [[], [[]]]}',
        "[]\n[[]]\n",
        '""\n""\n',
    ),
    answer(
        "empty-string",
        '{"predictions": ["", ["", ""]]}',
        '""\n["", ""]\n',
        '""\n,\n',
    ),
    answer(
        "pretty",
        '{\n    "predictions": [\n        {\n            "a": 1,\n            '
        '"b": [2.0, 3.0]\n        }\n    ]\n}',
        '{"a": 1,"b": [2.0, 3.0]}\n',
        "1,2.0,3.0\n",
    ),
    answer(
        "nested-objects",
        '{"predictions": [{"a": {"b": [1, 2]}, "c": "x"}]}',
        '{"a": {"b": [1, 2]}, "c": "x"}\n',
        "1,2,x\n",
    ),
    answer(
        "b64",
        '{"predictions": [{"b64": "QQ=="}, [{"b64": "Qg=="}, {"b64": ""}]]}',
        '{"b64": "QQ=="}\n[{"b64": "Qg=="}, {"b64": ""}]\n',
        "QQ==\nQg==,\n",
    ),
    answer(
        "b64-lookalike",
        '{"predictions": [{"b64": "QQ==", "n": 1}, {"b64": 2}]}',
        '{"b64": "QQ==", "n": 1}\n{"b64": 2}\n',
        "QQ==,1\n2\n",
    ),
    answer(
        "escapes",
        '{"predictions": ["\\u00e9\\u001F\\"\\\\/", "a,b", "c\\nd", "e\\r"]}',
        '"\\u00e9\\u001F\\"\\\\/"\n"a,b"\n"c\\nd"\n"e\\r"\n',
        '"\u00e9\u001f""\\/"\n"a,b"\n"c\nd"\n"e\r"\n',
    ),
    answer(
        "utf8",
        '{"predictions": ["\u00e9t\u00e9", "\u6f22"]}',
        '"\u00e9t\u00e9"\n"\u6f22"\n',
        "\u00e9t\u00e9\n\u6f22\n",
    ),
    answer(
        "numbers",
        '{"predictions": [12345678901234567890123, -0.0, 1e-07, 1.5E+300, true]}',
        "12345678901234567890123\n-0.0\n1e-07\n1.5E+300\ntrue\n",
        "12345678901234567890123\n-0.0\n1e-07\n1.5E+300\ntrue\n",
    ),
    answer(
        "columns",
        '{"outputs": {"a": [1, 2], "b": [["x", "y"], ["z", "w"]]}}',
        '{"a": 1,"b": ["x", "y"]}\n{"a": 2,"b": ["z", "w"]}\n',
        "1,x,y\n2,z,w\n",
    ),
    answer(
        "columns-of-other-lengths",
        '{"outputs": {"a": [1, 2], "b": [3]}}',
        '{"a": [1, 2], "b": [3]}\n',
        "1,2,3\n",
    ),
    answer(
        "columns-not-lists",
        '{"outputs": {"a": 1, "b": "t"}}',
        '{"a": 1, "b": "t"}\n',
        "1,t\n",
    ),
    answer("columnar-scalar", '{"outputs": 3.5}', "3.5\n", "3.5\n"),
    answer(
        "columnar-b64",
        '{"outputs": {"b64": "QQ=="}}',
        '{"b64": "QQ=="}\n',
        "QQ==\n",
    ),
    answer(
        "results",
        '{"results": [[["a,b", 0.5]], [["", NaN]]]}',
        '[["a,b", 0.5]]\n[["", NaN]]\n',
        '"a,b",0.5\n,NaN\n',
    ),
    answer("not-an-answer", '{"foo": [1]}', None, None),
    answer("broken-string", '{"predictions": ["a]}', None, None),
]
