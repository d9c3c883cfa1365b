"""The service under gunicorn: what gunicorn itself answers is JSON too."""

from __future__ import annotations

import socket

import orjson

from sagemaker_serving.service import main as service_main


def test_gunicorn_error_pages_are_json():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        service_main.write_json_error(ours, 431, "Request Header Fields Too Large", "too many")
        reply = theirs.recv(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"Content-Type: application/json" in head
    assert b"Content-Length: %d" % len(body) in head
    assert orjson.loads(body) == {"error": "Request Header Fields Too Large: too many"}


def test_json_errors_replaces_gunicorns_writer_for_every_worker_class(monkeypatch):
    from gunicorn import util
    from gunicorn.workers import base

    monkeypatch.setattr(util, "write_error", util.write_error)
    service_main.json_errors()
    assert base.util.write_error is service_main.write_json_error


def test_the_date_header_is_gunicorns_text_formatted_once_a_second(monkeypatch):
    import email.utils

    from gunicorn import util
    from gunicorn.http import wsgi

    monkeypatch.setattr(util, "write_error", util.write_error)
    monkeypatch.setattr(util, "http_date", util.http_date)
    for moment in (0.0, 1_795_524_000.25, 1_795_524_000.99, 1_795_524_001.0):
        assert service_main.http_date(moment) == email.utils.formatdate(int(moment), usegmt=True)
    before = email.utils.formatdate(usegmt=True)
    now = service_main.http_date()
    assert now in {before, email.utils.formatdate(usegmt=True)}  # a second may turn between
    service_main.json_errors()
    assert wsgi.util.http_date is service_main.http_date  # what Response.default_headers calls
