"""TensorFlow's profiler service (`tensorflow.ProfilerService`) on the gRPC port, as TF Serving
serves it unless `--enable_profiler=false`: TensorBoard's "Capture profile" and
`tf.profiler.experimental.client.trace("grpc://host:port", logdir, ms)` trace the server.

Profile runs one TF ProfilerSession for `opts.duration_ms` (ended early by Terminate with the
same session_id, or by the client cancelling), then writes the trace (an XSpace) to
`<repository_root>/<session_id>/<host_name>.xplane.pb`, or returns it in the answer when
`emit_xspace` is set. Monitor answers UNIMPLEMENTED, as TensorFlow's own service does. One
profile at a time per process: another answers INTERNAL with TensorFlow's message.

tensorflow-serving-api ships no profiler_service.proto: its messages are declared here with
TensorFlow's package, names and field numbers (the XSpace as bytes: the same bytes on the wire).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2

from tfs_model_server.core.config_protos import declare_field, declared_messages

log = logging.getLogger(__name__)

SERVICE = "tensorflow.ProfilerService"
_FILE = "tfs_model_server/profiler_service.proto"
_F = descriptor_pb2.FieldDescriptorProto


def _build_file() -> descriptor_pb2.FileDescriptorProto:
    from tensorflow.tsl.profiler.protobuf import profiler_options_pb2

    file = descriptor_pb2.FileDescriptorProto(
        name=_FILE,
        package="tensorflow",
        syntax="proto3",
        dependency=[profiler_options_pb2.DESCRIPTOR.name],
    )
    request = file.message_type.add(name="ProfileRequest")
    declare_field(request, "duration_ms", 1, _F.TYPE_UINT64)
    declare_field(request, "max_events", 2, _F.TYPE_UINT64)
    declare_field(request, "opts", 4, _F.TYPE_MESSAGE, ".tensorflow.ProfileOptions")
    declare_field(request, "repository_root", 5, _F.TYPE_STRING)
    declare_field(request, "session_id", 6, _F.TYPE_STRING)
    declare_field(request, "host_name", 7, _F.TYPE_STRING)
    declare_field(request, "emit_xspace", 9, _F.TYPE_BOOL)
    response = file.message_type.add(name="ProfileResponse")
    declare_field(response, "empty_trace", 7, _F.TYPE_BOOL)
    declare_field(response, "xspace", 8, _F.TYPE_BYTES)  # an XSpace message, as bytes
    terminate = file.message_type.add(name="TerminateRequest")
    declare_field(terminate, "session_id", 1, _F.TYPE_STRING)
    file.message_type.add(name="TerminateResponse")
    # XSpace.planes (1) -> XPlane.lines (3) -> XLine.events (4), names left unread
    line = file.message_type.add(name="XLineEvents")
    declare_field(line, "events", 4, _F.TYPE_BYTES, repeated=True)
    plane = file.message_type.add(name="XPlaneLines")
    declare_field(plane, "lines", 3, _F.TYPE_MESSAGE, ".tensorflow.XLineEvents", repeated=True)
    space = file.message_type.add(name="XSpacePlanes")
    declare_field(space, "planes", 1, _F.TYPE_MESSAGE, ".tensorflow.XPlaneLines", repeated=True)
    return file


def messages() -> dict[str, Any]:
    """ProfileRequest, ProfileResponse, TerminateRequest/Response and XSpacePlanes (an XSpace
    reader that counts events), declared on first use."""
    names = ("ProfileRequest", "ProfileResponse", "TerminateRequest", "TerminateResponse")
    return declared_messages(_build_file, _FILE, "tensorflow", (*names, "XSpacePlanes"))


def is_empty(xspace: bytes, reader: Any) -> bool:
    """No event on any line of any plane (TensorFlow's IsEmpty(XSpace))."""
    planes = reader.FromString(xspace).planes
    return not any(line.events for plane in planes for line in plane.lines)


def session_options(opts: Any) -> dict[str, int]:
    """A ProfileOptions as TensorFlow's Python ProfilerSession takes it: version 0 means
    TensorFlow's defaults; a start time in the future becomes a delay."""
    if not opts.version:
        return {}
    options = {
        "host_tracer_level": opts.host_tracer_level,
        "device_tracer_level": opts.device_tracer_level,
        "python_tracer_level": opts.python_tracer_level,
    }
    if opts.start_timestamp_ns:
        options["delay_ms"] = max(0, (opts.start_timestamp_ns - time.time_ns()) // 1_000_000)
    return options


def xplane_path(repository_root: str, session_id: str, host: str) -> tuple[str, str]:
    """(directory, file) TensorFlow's SaveXSpace writes: <root>/<session>/<host>.xplane.pb,
    a ':' in the host name written as '_'."""
    directory = "/".join(part.rstrip("/") for part in (repository_root, session_id) if part)
    return directory, f"{directory}/{host.replace(':', '_')}.xplane.pb"


class ProfilerService:
    """Profile, Terminate and Monitor of tensorflow.ProfilerService."""

    def __init__(self) -> None:
        self.messages = messages()
        self._lock = threading.Lock()
        self._stops: dict[str, threading.Event] = {}  # by session_id, as Terminate names them

    def _stop_event(self, session_id: str) -> threading.Event:
        with self._lock:
            return self._stops.setdefault(session_id, threading.Event())

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._stops.pop(session_id, None)

    def Profile(self, request: Any, context: grpc.ServicerContext) -> Any:
        from tensorflow.python.lib.io import file_io
        from tensorflow.python.profiler.internal import _pywrap_profiler

        log.info("Received a profile request for %d ms", request.opts.duration_ms)
        stop = self._stop_event(request.session_id)
        context.add_callback(stop.set)  # the client went away
        with tempfile.TemporaryDirectory(prefix="tfs-profile-") as scratch:
            session = _pywrap_profiler.ProfilerSession()
            try:
                session.start(scratch, session_options(request.opts))
            except Exception as exc:
                self._forget(request.session_id)
                context.abort(grpc.StatusCode.INTERNAL, str(exc))
            try:
                stop.wait(request.opts.duration_ms / 1000)
            finally:
                self._forget(request.session_id)
                session.export_to_tb()  # stops; the XSpace goes to scratch/plugins/profile/
            [written] = Path(scratch).glob("plugins/profile/*/*.xplane.pb")
            xspace = written.read_bytes()
        if not context.is_active():
            context.abort(grpc.StatusCode.CANCELLED, "Cancelled")
        response = self.messages["ProfileResponse"](
            empty_trace=is_empty(xspace, self.messages["XSpacePlanes"])
        )
        if request.emit_xspace:
            response.xspace = xspace
            return response
        host = request.opts.override_hostname or request.host_name
        directory, path = xplane_path(request.repository_root, request.session_id, host)
        try:
            file_io.recursive_create_dir(directory)
            file_io.write_string_to_file(path, xspace)
        except Exception as exc:
            context.abort(grpc.StatusCode.INTERNAL, getattr(exc, "message", None) or str(exc))
        log.info("Collecting XSpace to repository: %s", path)
        return response

    def Terminate(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._stop_event(request.session_id).set()
        return self.messages["TerminateResponse"]()

    def Monitor(self, request: bytes, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "unimplemented.")


def add_to_server(server: grpc.Server) -> None:
    """Serve the profiler service on `server`."""
    service = ProfilerService()
    declared = service.messages

    def unary(method: Any, request: Any, response: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            method,
            request_deserializer=request.FromString if request else None,
            response_serializer=response.SerializeToString if response else None,
        )

    handlers = {
        "Profile": unary(service.Profile, declared["ProfileRequest"], declared["ProfileResponse"]),
        "Terminate": unary(
            service.Terminate, declared["TerminateRequest"], declared["TerminateResponse"]
        ),
        "Monitor": unary(service.Monitor, None, None),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    log.info("Profiler service is enabled")
