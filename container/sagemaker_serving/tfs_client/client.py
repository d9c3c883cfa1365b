"""The model server instances of this container: REST and gRPC to each, round robin, and
the models' metadata (cached)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sagemaker_serving.tfs_client.errors import ModelServerError
from sagemaker_serving.tfs_client.grpc import GrpcClient
from sagemaker_serving.tfs_client.health import model_path
from sagemaker_serving.tfs_client.rest import RestClient, error_text


@dataclass
class Target:
    """One instance as a request's context names it: where its REST API is, its gRPC port and
    the shared grpc.Channel to it (made by `ModelServerClient.connect` on first use)."""

    index: int
    rest_base: str
    grpc_port: int
    channel: Any = None


class ModelServerClient:
    """Instance `i` answers REST on rest_ports[i] and gRPC on grpc_ports[i]."""

    def __init__(self, rest_ports: Sequence[int], grpc_ports: Sequence[int]) -> None:
        self.rest = RestClient(rest_ports)
        self.grpc = GrpcClient(grpc_ports)
        self.targets = [
            Target(i, self.rest.uri(i, ""), grpc)
            for i, (_, grpc) in enumerate(zip(rest_ports, grpc_ports, strict=True))
        ]
        # round robin over the targets in C (a request's context costs no call of ours)
        self.next_target = itertools.cycle(self.targets).__next__
        self._metadata: dict[tuple[str, str | None], dict] = {}
        self._lock = threading.Lock()

    @property
    def rest_ports(self) -> list[int]:
        return self.rest.ports

    @property
    def grpc_ports(self) -> list[int]:
        return self.grpc.ports

    def connect(self, target: Target) -> Any:
        """The target's grpc.Channel, made now if it was not yet."""
        if target.channel is None:
            target.channel = self.grpc.channel(target.index)
        return target.channel

    def metadata(self, model: str, version: str | None, deadline: float) -> dict:
        """The REST metadata of `model` (of `version` if given), from the next instance on
        first use; cached per (model, version) until `forget` or `clear`."""
        key = (model, version)
        cached = self._metadata.get(key)
        if cached is not None:
            return cached
        versioned = f"/versions/{version}" if version else ""
        path = f"{model_path(model)}{versioned}/metadata"
        status, body = self.rest.get(self.next_target().index, path, deadline)
        if status != 200:
            raise ModelServerError(error_text(body), status)
        doc = json.loads(body)
        with self._lock:
            self._metadata[key] = doc
        return doc

    def forget(self, model: str) -> None:
        """Drop the cached metadata of every version of `model` (it was loaded or unloaded)."""
        with self._lock:
            for key in [key for key in self._metadata if key[0] == model]:
                del self._metadata[key]

    def clear(self) -> None:
        """Drop all cached metadata (the model servers' models changed)."""
        with self._lock:
            self._metadata.clear()
