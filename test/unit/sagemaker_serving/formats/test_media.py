"""sagemaker_serving.formats.media: the media types read (config/body_formats.py's tables, which
the njs fast path is given: launcher/test_njs_tables.py), their parameters, Accept negotiation."""

from __future__ import annotations

import pytest

from sagemaker_serving.config.body_formats import (
    ACCEPT_TYPES,
    BINARY_TYPES,
    CSV,
    JSON_LINES_TYPES,
    JSON_TYPES,
    TEXT_TYPES,
)
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.media import client_text, media_params, media_type, negotiate


def test_media_type_is_lower_case_without_parameters():
    assert media_type(None) == media_type("") == ""
    assert media_type("Application/JSON; charset=UTF-8") == "application/json"
    assert media_type("  text/csv ") == media_type("text/csv;header=present") == "text/csv"


def test_media_params_lower_case_names_and_unquote_values():
    assert media_params('text/csv; Header=present;charset="latin-1"; flag') == {
        "header": "present",
        "charset": "latin-1",
    }


def test_text_types_are_json_json_lines_and_csv():
    assert JSON_TYPES | JSON_LINES_TYPES | {CSV} == TEXT_TYPES


def test_binary_types_are_the_services_alone():
    assert {
        "application/x-image",
        "application/octet-stream",
        "application/x-npy",
        "application/x-tfexample",
        "application/tfrecord",
        "application/x-tfrecord",
    } == BINARY_TYPES
    assert not BINARY_TYPES & TEXT_TYPES


def test_accept_types_are_json_first_then_json_lines_then_csv():
    assert ACCEPT_TYPES[0] == "application/json" and ACCEPT_TYPES[-1] == CSV
    assert set(ACCEPT_TYPES) == {"application/json", CSV, *JSON_LINES_TYPES}


@pytest.mark.parametrize(
    ("accept", "ctype"),
    [
        (None, "application/json"),
        ("  ", "application/json"),
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
