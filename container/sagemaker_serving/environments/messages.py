"""What crosses between the service and a handler process besides the body: the request's
Context (without its gRPC channel, which each process makes for itself) and the model
server's answer (rebuilt as a requests.Response on the other side).

Standard library only (requests is imported when an answer is rebuilt: the user's version in
a handler process, the service's in the service).
"""

from __future__ import annotations

import threading
from typing import Any

from sagemaker_serving.tfs_client.responses import as_response
from sagemaker_serving.user_code.handler_api import Context

_channels: dict[int, Any] = {}
_channels_lock = threading.Lock()  # two threads asking at once make one channel


def _grpc_channel(port: int) -> Any:
    with _channels_lock:
        if port not in _channels:
            import grpc  # the user's to import, in the user's version

            _channels[port] = grpc.insecure_channel(f"localhost:{port}")
        return _channels[port]


class LazyChannel:
    """Context.channel: the process's gRPC channel to the model server, made on first use."""

    def __init__(self, port: int) -> None:
        self._port = port

    def __getattr__(self, name: str) -> Any:
        return getattr(_grpc_channel(self._port), name)


def make_context(fields: dict[str, Any]) -> Context:
    return Context(**{**fields, "channel": LazyChannel(int(fields["grpc_port"]))})


def context_fields(context: Context) -> dict[str, Any]:
    fields = context._asdict()
    fields.pop("channel", None)
    return fields


def make_response(meta: dict[str, Any], body: bytes) -> Any:
    """The model server's answer as a requests.Response (the user's requests)."""
    headers = meta.get("headers") or {}
    return as_response(
        int(meta["status"]), meta.get("reason") or "", headers, body, meta.get("url") or ""
    )


def response_meta(response: Any) -> tuple[dict[str, Any], bytes]:
    return (
        {
            "status": response.status_code,
            "reason": getattr(response, "reason", "") or "",
            "headers": dict(getattr(response, "headers", {}) or {}),
            "url": getattr(response, "url", "") or "",
        },
        bytes(response.content),
    )
