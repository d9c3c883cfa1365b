"""The model server instances of this container: REST and gRPC to each, round robin."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from sagemaker_serving.tfs_client.grpc import GrpcClient
from sagemaker_serving.tfs_client.rest import RestClient


class ModelServerClient:
    """Instance `i` answers REST on rest_ports[i] and gRPC on grpc_ports[i]."""

    def __init__(self, rest_ports: Sequence[int], grpc_ports: Sequence[int]) -> None:
        self.rest = RestClient(rest_ports)
        self.grpc = GrpcClient(grpc_ports)
        self._next = itertools.count()

    @property
    def rest_ports(self) -> list[int]:
        return self.rest.ports

    @property
    def grpc_ports(self) -> list[int]:
        return self.grpc.ports

    def pick(self) -> int:
        """An instance index, round robin."""
        return next(self._next) % len(self.rest.ports)

    def metadata(self, model: str, version: str | None, deadline: float) -> dict:
        """The REST metadata of `model` (`version`), cached (RestClient.metadata)."""
        return self.rest.metadata(self.pick(), model, version, deadline)

    def forget(self, model: str) -> None:
        """`model` was loaded or unloaded: what is cached about it is stale."""
        self.rest.forget(model)

    def clear(self) -> None:
        """The models on the model servers changed: nothing cached about them holds."""
        self.rest.clear()
