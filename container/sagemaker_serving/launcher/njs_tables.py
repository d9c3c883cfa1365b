"""The tables nginx/tfs.js reads, written by serve from their Python homes beside the rendered
nginx.conf as a module tfs.js imports (`tfs_rules.js`): the routing rules it reads a TF Serving
request's path with (config/routing_rules.py), the media types of a request it may pass
straight on or wrap (config/body_formats.py), and nginx's own error answers (nginx_config.py).
tfs.js writes none of these itself (test_njs_tables.py checks)."""

from __future__ import annotations

import json
from pathlib import Path

from sagemaker_serving.config import body_formats as bodies
from sagemaker_serving.config import routing_rules as routing

MODULE_NAME = "tfs_rules.js"  # what tfs.js imports (nginx's js_path names the directory)
ErrorAnswer = tuple[int, str] | tuple[int, str, str]  # status, message[, Allow header]


def _whole(pattern: str) -> str:
    """A pattern matched whole, as Python's fullmatch does, for JavaScript's RegExp."""
    return f"^(?:{pattern})$"


def njs_tables(errors: dict[str, ErrorAnswer]) -> dict[str, object]:
    """The tables by the names tfs.js reads them."""
    return {
        "attributesHeader": routing.HEADER,
        "modelNameKey": routing.MODEL_NAME,
        "modelVersionKey": routing.MODEL_VERSION,
        "methodKey": routing.METHOD,
        "modelNamePattern": _whole(routing.MODEL_NAME_PATTERN.pattern),
        "modelVersionPattern": _whole(routing.MODEL_VERSION_PATTERN.pattern),
        "methods": dict(routing.METHODS),
        "defaultMethod": routing.DEFAULT_METHOD,
        "json": bodies.JSON,
        "defaultType": bodies.DEFAULT_TYPE,
        "jsonTypes": sorted(bodies.JSON_TYPES),
        "csv": bodies.CSV,
        "utf8Charsets": list(bodies.UTF8_CHARSETS),
        "jsonAnswerTypes": sorted(bodies.JSON_ANSWER_ACCEPTS),
        "requestKeys": list(bodies.REQUEST_KEYS),
        "errors": errors,
        "unknownError": "500",  # what an error page of no name of `errors` answers
    }


def njs_module(errors: dict[str, ErrorAnswer]) -> str:
    """The module's text: one object literal (JSON is JavaScript)."""
    tables = json.dumps(njs_tables(errors), indent=4)
    return (
        "// Written by serve from the Python definitions (sagemaker_serving/launcher/"
        "njs_tables.py): do not edit.\n"
        f"export default {tables};\n"
    )


def write_njs_tables(directory: Path, errors: dict[str, ErrorAnswer]) -> Path:
    path = directory / MODULE_NAME
    path.write_text(njs_module(errors))
    return path
