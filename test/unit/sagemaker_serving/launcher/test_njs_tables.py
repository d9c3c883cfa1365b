"""The njs tables (launcher/nginx_config.py's `njs_tables`): what nginx/tfs.js reads comes
from its Python homes and nowhere else. serve writes the tables beside nginx.conf; tfs.js
reads every one of them and writes none of their values itself; it stays small (it converts
nothing: the Python service is the one implementation of the contract)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sagemaker_serving.config import body_formats, routing_rules
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import (
    MODULE_NAME,
    NGINX_DIR,
    front_door_errors,
    njs_tables,
    write_njs_tables,
)

TFS_JS = (NGINX_DIR / "tfs.js").read_text()
# tfs.js without its comments (no string in it holds `//`)
TFS_JS_CODE = re.sub(r"//[^\n]*", "", TFS_JS)
_STRING = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"")
STRING_LITERALS = {m[1] or m[2] for m in _STRING.finditer(TFS_JS_CODE)}
ERRORS = front_door_errors(Settings.from_env({}))


def table_strings(value: object) -> set[str]:
    """Every string in a table: list items, keys and values."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value) | {s for v in value.values() for s in table_strings(v)}
    if isinstance(value, list | tuple):
        return {s for v in value for s in table_strings(v)}
    return set()


def test_serve_writes_the_module_tfs_js_imports(tmp_path: Path):
    path = write_njs_tables(tmp_path, ERRORS)
    assert path.name == MODULE_NAME
    assert f"import RULES from '{MODULE_NAME}';" in TFS_JS
    text = path.read_text()
    assert text.startswith("// Written by serve")
    tables = json.loads(text.split("export default ", 1)[1].rstrip().rstrip(";"))
    assert tables == json.loads(json.dumps(njs_tables(ERRORS)))


def test_tfs_js_reads_every_table():
    unread = [key for key in njs_tables(ERRORS) if f"RULES.{key}" not in TFS_JS_CODE]
    assert not unread, unread


def test_tfs_js_writes_no_rule_of_its_own():
    """No value of a table (a media type, an attribute, a method, a body key, an error
    message) and no pattern of the Python homes is written in tfs.js."""
    values = set().union(*(table_strings(value) for value in njs_tables(ERRORS).values()))
    written = sorted(values & STRING_LITERALS - {""})
    assert not written, written
    for pattern in (
        routing_rules.MODEL_NAME_PATTERN.pattern,
        routing_rules.MODEL_VERSION_PATTERN.pattern,
    ):
        assert pattern not in TFS_JS, pattern


def test_the_tables_are_their_python_homes():
    tables = njs_tables(ERRORS)
    assert tables["attributesHeader"] == routing_rules.HEADER
    assert tables["methods"] == dict(routing_rules.METHODS)
    assert set(tables["jsonTypes"]) == body_formats.JSON_TYPES
    assert set(tables["jsonAnswerTypes"]) == body_formats.JSON_ANSWER_ACCEPTS
    assert tables["requestKeys"] == list(body_formats.REQUEST_KEYS)
    assert tables["errors"] is ERRORS
    assert re.fullmatch(tables["modelNamePattern"][1:-1], "half_plus_three")


def test_tfs_js_is_small():
    """It passes a TF Serving request on and writes nginx's own errors; nothing else."""
    assert len(TFS_JS.splitlines()) <= 300
