"""The njs fast path's tables, written by serve from their Python homes beside the rendered
nginx.conf as a module nginx/tfs.js imports (`tfs_rules.js`), so the fast path cannot drift
from the Python service: the routing rules (config/routing_rules.py, with the model version
bound of tfs_rest_json/model_version.py) and the body formats, Accept names and echo limit
(config/body_formats.py). tfs.js writes none of these itself (test_njs_tables.py checks)."""

from __future__ import annotations

import json
from pathlib import Path

from sagemaker_serving.config.body_formats import (
    ACCEPT_TYPES,
    ANSWER_KEYS,
    COLUMNAR_ANSWER_KEY,
    CSV,
    DEFAULT_TYPE,
    JSON,
    JSON_LINES_NAMES,
    JSON_TYPES,
    MAX_ECHO,
    QVALUE_PATTERN,
    REQUEST_KEYS,
    SUPPORTED,
    UTF8_CHARSETS,
)
from sagemaker_serving.config.routing_rules import (
    DEFAULT_METHOD,
    EXPECTED,
    HEADER,
    METHOD,
    METHODS,
    MODEL_NAME,
    MODEL_NAME_PATTERN,
    MODEL_VERSION,
    MODEL_VERSION_PATTERN,
)

MODULE_NAME = "tfs_rules.js"  # what tfs.js imports (nginx's js_path names the directory)


def _whole(pattern: str) -> str:
    """A pattern matched whole, as Python's fullmatch does, for JavaScript's RegExp."""
    return f"^(?:{pattern})$"


def njs_tables() -> dict[str, object]:
    """The tables by the names tfs.js reads them."""
    return {
        "attributesHeader": HEADER,
        "modelNameKey": MODEL_NAME,
        "modelVersionKey": MODEL_VERSION,
        "methodKey": METHOD,
        "modelNamePattern": _whole(MODEL_NAME_PATTERN.pattern),
        "modelVersionPattern": _whole(MODEL_VERSION_PATTERN.pattern),
        "methods": dict(METHODS),  # method -> the request key of its records
        "defaultMethod": DEFAULT_METHOD,
        "expected": dict(EXPECTED),  # attribute -> what a bad value should have been
        "json": JSON,
        "csv": CSV,
        "defaultType": DEFAULT_TYPE,
        "jsonTypes": sorted(JSON_TYPES),
        "jsonLinesTypes": list(JSON_LINES_NAMES),
        "utf8Charsets": list(UTF8_CHARSETS),
        "acceptTypes": list(ACCEPT_TYPES),
        "supported": SUPPORTED,
        "qvaluePattern": _whole(QVALUE_PATTERN),
        "maxEcho": MAX_ECHO,
        "requestKeys": list(REQUEST_KEYS),
        "answerKeys": list(ANSWER_KEYS),
        "columnarAnswerKey": COLUMNAR_ANSWER_KEY,
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
