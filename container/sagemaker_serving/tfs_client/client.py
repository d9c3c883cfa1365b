"""The model server instances of this container: REST and gRPC to each, round robin."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sagemaker_serving.tfs_client.grpc import GrpcClient
from sagemaker_serving.tfs_client.rest import HOST, RestClient


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
            Target(i, f"http://{HOST}:{rest}", grpc)
            for i, (rest, grpc) in enumerate(zip(rest_ports, grpc_ports, strict=True))
        ]
        # round robin over the targets in C (a request's context costs no call of ours)
        self.next_target = itertools.cycle(self.targets).__next__

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
        """The REST metadata of `model` (`version`), cached (RestClient.metadata)."""
        return self.rest.metadata(self.next_target().index, model, version, deadline)

    def forget(self, model: str) -> None:
        """`model` was loaded or unloaded: what is cached about it is stale."""
        self.rest.forget(model)

    def clear(self) -> None:
        """The models on the model servers changed: nothing cached about them holds."""
        self.rest.clear()
