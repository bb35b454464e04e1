"""Beam's local gRPC services on loopback. Beam 2.59 binds the DirectRunner's control, data,
state and logging servers, a logging server per multi_processing worker, and the worker pool
to '[::]', every interface, with no authentication; all their clients are on this machine
('localhost:PORT'). Binding 'localhost' instead serves both loopbacks on one port and no other
address.
"""

from __future__ import annotations

import types
from typing import Any

import grpc

_ALL_INTERFACES = "[::]:"


class _LoopbackServer:
    """A grpc.Server that serves loopback where it was asked for every interface."""

    def __init__(self, server: grpc.Server) -> None:
        self._server = server

    def add_insecure_port(self, address: str) -> int:
        if address.startswith(_ALL_INTERFACES):
            address = "localhost:" + address[len(_ALL_INTERFACES):]
        return self._server.add_insecure_port(address)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class _LoopbackGrpc(types.ModuleType):
    """The grpc module as Beam's servers see it: grpc.server() hands out loopback servers."""

    def __init__(self) -> None:
        super().__init__("grpc")

    def server(self, *args: Any, **kwargs: Any) -> _LoopbackServer:
        return _LoopbackServer(grpc.server(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(grpc, name)


def bind_beam_servers_to_loopback() -> None:
    """Makes the DirectRunner's and the worker pool's servers in this process loopback-only."""
    from apache_beam.runners.portability import local_job_service
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    from apache_beam.runners.worker import worker_pool_main

    for module in (worker_handlers, local_job_service, worker_pool_main):
        if not isinstance(module.grpc, _LoopbackGrpc):
            module.grpc = _LoopbackGrpc()  # type: ignore[attr-defined]
