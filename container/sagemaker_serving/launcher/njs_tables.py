"""The njs fast path's tables, written by serve from their Python homes beside the rendered
nginx.conf as a module nginx/tfs.js imports (`tfs_rules.js`), so the fast path cannot drift
from the Python service: the routing rules (config/routing_rules.py, with the model version
bound of tfs_rest_json/model_version.py) and the body formats, Accept names and echo limit
(config/body_formats.py). tfs.js writes none of these itself (test_njs_tables.py checks)."""

from __future__ import annotations

import json
from pathlib import Path

from sagemaker_serving.config import body_formats as bodies
from sagemaker_serving.config import routing_rules as routing

MODULE_NAME = "tfs_rules.js"  # what tfs.js imports (nginx's js_path names the directory)


def _whole(pattern: str) -> str:
    """A pattern matched whole, as Python's fullmatch does, for JavaScript's RegExp."""
    return f"^(?:{pattern})$"


def njs_tables() -> dict[str, object]:
    """The tables by the names tfs.js reads them."""
    return {
        "attributesHeader": routing.HEADER,
        "modelNameKey": routing.MODEL_NAME,
        "modelVersionKey": routing.MODEL_VERSION,
        "methodKey": routing.METHOD,
        "modelNamePattern": _whole(routing.MODEL_NAME_PATTERN.pattern),
        "modelVersionPattern": _whole(routing.MODEL_VERSION_PATTERN.pattern),
        "methods": dict(routing.METHODS),  # method -> the request key of its records
        "defaultMethod": routing.DEFAULT_METHOD,
        "expected": dict(routing.EXPECTED),  # attribute -> what a bad value should have been
        "json": bodies.JSON,
        "csv": bodies.CSV,
        "defaultType": bodies.DEFAULT_TYPE,
        "jsonTypes": sorted(bodies.JSON_TYPES),
        "jsonLinesTypes": list(bodies.JSON_LINES_NAMES),
        "utf8Charsets": list(bodies.UTF8_CHARSETS),
        "acceptTypes": list(bodies.ACCEPT_TYPES),
        "supported": bodies.SUPPORTED,
        "qvaluePattern": _whole(bodies.QVALUE_PATTERN),
        "maxEcho": bodies.MAX_ECHO,
        "requestKeys": list(bodies.REQUEST_KEYS),
        "answerKeys": list(bodies.ANSWER_KEYS),
        "columnarAnswerKey": bodies.COLUMNAR_ANSWER_KEY,
    }


def njs_module() -> str:
    """The module's text: one object literal (JSON is JavaScript)."""
    tables = json.dumps(njs_tables(), indent=4)
    return (
        "// Written by serve from the Python definitions (sagemaker_serving/launcher/"
        "njs_tables.py): do not edit.\n"
        f"export default {tables};\n"
    )


def write_njs_tables(directory: Path) -> Path:
    """The module, in `directory` (which the rendered nginx.conf names as a js_path)."""
    path = directory / MODULE_NAME
    path.write_text(njs_module())
    return path
