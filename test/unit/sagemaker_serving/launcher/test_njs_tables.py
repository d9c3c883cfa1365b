"""sagemaker_serving.launcher.njs_tables: the njs fast path's tables come from their Python homes
and nowhere else. serve writes them beside nginx.conf; nginx/tfs.js reads every one of them and
writes none of their values itself; the messages both paths answer are the same words (the
conformance tables, test/integration/test_format_conformance.py and test_answer_conformance.py,
prove the two paths answer alike)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sagemaker_serving.config import body_formats, routing_rules
from sagemaker_serving.formats import answers, csv_rows, json_bodies, media
from sagemaker_serving.launcher import nginx_config
from sagemaker_serving.launcher.nginx_config import NGINX_DIR, ping_targets
from sagemaker_serving.launcher.njs_tables import (
    MODULE_NAME,
    njs_module,
    njs_tables,
    write_njs_tables,
)
from tfs_rest_json.model_version import MAX_MODEL_VERSION

TFS_JS = (NGINX_DIR / "tfs.js").read_text()
# tfs.js without its comments (no string in it holds `//`)
TFS_JS_CODE = re.sub(r"//[^\n]*", "", TFS_JS)
_STRING = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"")
STRING_LITERALS = {m[1] or m[2] for m in _STRING.finditer(TFS_JS_CODE)}


def table_strings(value: object) -> set[str]:
    """Every string in a table: list items, keys and values."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value) | {s for v in value.values() for s in table_strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in table_strings(v)}
    return set()


def test_serve_writes_the_module_tfs_js_imports(tmp_path: Path):
    path = write_njs_tables(tmp_path)
    assert path.name == MODULE_NAME
    assert f"import RULES from '{MODULE_NAME}';" in TFS_JS
    text = path.read_text()
    assert text == njs_module()
    assert json.loads(text.split("export default ", 1)[1].rstrip().rstrip(";")) == njs_tables()


def test_tfs_js_reads_every_table():
    unread = [key for key in njs_tables() if f"RULES.{key}" not in TFS_JS_CODE]
    assert not unread, unread


def test_tfs_js_writes_no_rule_of_its_own():
    """No value of a table (a media type, an Accept name, an attribute, a method, a body key)
    and no pattern of the Python homes is written in tfs.js: they come from the tables."""
    values = set().union(*(table_strings(value) for value in njs_tables().values()))
    written = sorted(values & STRING_LITERALS)
    assert not written, written
    for pattern in (
        routing_rules.MODEL_NAME_PATTERN.pattern,
        routing_rules.MODEL_VERSION_PATTERN.pattern,
        body_formats.QVALUE_PATTERN,
        "0,254",
        "1,19",
    ):
        assert pattern not in TFS_JS, pattern
    assert str(body_formats.MAX_ECHO) not in re.findall(r"\bMAX_ECHO = ([^;]*);", TFS_JS_CODE)[0]


def test_the_tables_are_their_python_homes():
    tables = njs_tables()
    assert tables["attributesHeader"] == routing_rules.HEADER
    assert tables["methods"] == dict(routing_rules.METHODS)
    assert tables["expected"] == dict(routing_rules.EXPECTED)
    assert set(tables["jsonTypes"]) == body_formats.JSON_TYPES
    assert tables["jsonLinesTypes"] == list(body_formats.JSON_LINES_NAMES)
    assert tables["acceptTypes"] == list(body_formats.ACCEPT_TYPES)
    assert {*tables["jsonTypes"], *tables["jsonLinesTypes"], tables["csv"]} == (
        body_formats.TEXT_TYPES
    )
    assert tables["maxEcho"] == body_formats.MAX_ECHO
    assert tables["requestKeys"] == list(body_formats.REQUEST_KEYS)
    assert tables["answerKeys"] == list(body_formats.ANSWER_KEYS)


@pytest.mark.parametrize(
    ("key", "value", "valid"),
    [
        ("modelNamePattern", "half_plus_three", True),
        ("modelNamePattern", "a" * 255, True),
        ("modelNamePattern", "a" * 256, False),
        ("modelNamePattern", ".hidden", False),
        ("modelNamePattern", "a/b", False),
        ("modelNamePattern", "m\n", False),
        ("modelVersionPattern", str(MAX_MODEL_VERSION), True),
        ("modelVersionPattern", "9" * len(str(MAX_MODEL_VERSION)), True),  # past int64: later
        ("modelVersionPattern", "1" * (len(str(MAX_MODEL_VERSION)) + 1), False),
        ("modelVersionPattern", "-1", False),
        ("modelVersionPattern", "", False),
        ("qvaluePattern", "0.5", True),
        ("qvaluePattern", ".5", True),
        ("qvaluePattern", "1.", True),
        ("qvaluePattern", "0.5x", False),
    ],
)
def test_the_anchored_patterns_match_as_python_s_fullmatch(key: str, value: str, valid: bool):
    """tfs.js builds RegExp(pattern) and tests it: anchored whole, as Python's fullmatch (the
    patterns use only the syntax the two languages share)."""
    njs = njs_tables()[key]
    assert isinstance(njs, str) and njs.endswith("$")
    # JavaScript's `$` (no m flag) is the end of the text; Python's also matches before a final \n
    assert bool(re.search(njs[:-1] + r"\Z", value)) is valid
    python = {
        "modelNamePattern": routing_rules.MODEL_NAME_PATTERN,
        "modelVersionPattern": routing_rules.MODEL_VERSION_PATTERN,
        "qvaluePattern": re.compile(body_formats.QVALUE_PATTERN),
    }[key]
    assert bool(python.fullmatch(value)) is valid


# The messages tfs.js answers that the Python service answers too, by module.
SHARED_MESSAGES = {
    json_bodies: ["Empty request body: expected JSON", "Empty request body: expected JSON Lines"],
    csv_rows: ["Empty request body: expected CSV rows"],
    answers: ["The model server answered with a body that is not a TF Serving answer"],
    media: ["Not Acceptable: ", " (supported: "],
}


@pytest.mark.parametrize("module", list(SHARED_MESSAGES), ids=lambda m: m.__name__)
def test_the_messages_both_paths_answer_are_the_same_words(module):
    source = Path(module.__file__).read_text()
    for message in SHARED_MESSAGES[module]:
        assert message in STRING_LITERALS, message
        assert message in source, (module.__name__, message)


def test_the_405_of_invocations_is_the_same_words_as_nginx_s():
    """The fast path answers a GET /invocations itself; with user code nginx does
    (nginx_config.SERVICE_LOCATIONS)."""
    message = "Method Not Allowed: use POST /invocations"
    assert message in STRING_LITERALS
    assert f'"error": "{message}"' in nginx_config.SERVICE_LOCATIONS


def test_ping_reads_the_targets_nginx_config_writes():
    """/ping's checks (`kind=URI`, nginx_config.ping_targets) by the kinds tfs.js knows, and
    the model's name read back from its URI by tfs.js's INSTANCE_MODEL."""
    kinds = re.search(r"var PING_CHECKS = table\(\{(.*?)\}\)", TFS_JS_CODE, re.DOTALL)
    assert kinds
    known = set(re.findall(r"(\w+): ", kinds[1]))
    instance_model = re.search(r"var INSTANCE_MODEL = /(.*)/;", TFS_JS_CODE)
    assert instance_model
    pattern = re.compile(instance_model[1].replace("\\/", "/"))
    targets = ping_targets([8501, 8503], ["half_plus_three", "m.2"]).split()
    targets.append("ok=/_service/ping")  # nginx_conf adds the Python service's
    for target in targets:
        kind, _, uri = target.partition("=")
        assert kind in known, target
        if kind == "model":
            match = pattern.fullmatch(uri)
            assert match and match[1] in ("half_plus_three", "m.2"), uri
