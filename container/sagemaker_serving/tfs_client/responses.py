"""The model server's answer as the `requests.Response` handlers receive, built field by
field: the service's (tfs_client.rest) and a handler process's (environments.messages) alike.
Standard library only until a Response is built (requests is then imported: the user's version
in a handler process, the service's in the service)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


@functools.cache
def _requests() -> tuple[Any, Any, Any]:
    """requests and the two helpers a Response is built with, imported on first use."""
    import requests
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    return requests, CaseInsensitiveDict, get_encoding_from_headers


def as_response(
    status: int, reason: str, headers: Headers, body: bytes, url: str, request: Any = None
) -> Any:
    """A requests.Response of an answer; `request` is what was asked (a bare POST to `url`
    when not given, without parsing the URL again)."""
    requests, CaseInsensitiveDict, get_encoding_from_headers = _requests()
    reply = requests.Response()
    reply.status_code = status
    reply.reason = reason
    reply.headers = CaseInsensitiveDict(headers)
    # read whole, as requests leaves a Response it unpickles: content set, no raw stream
    reply._content, reply._content_consumed = body, True
    reply.url = url
    if request is None:
        request = requests.PreparedRequest()
        request.method, request.url, request.headers = "POST", url, CaseInsensitiveDict()
    reply.request = request
    reply.encoding = get_encoding_from_headers(reply.headers)
    return reply
