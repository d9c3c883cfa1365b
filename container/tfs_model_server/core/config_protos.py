"""Text-format config files: model config (shipped protos) and the TF Serving protos
tensorflow-serving-api does not ship (BatchingParameters, MonitoringConfig, SSLConfig),
declared here with the same package, names and field numbers so their text format parses
identically."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    wrappers_pb2,  # noqa: F401  (registers wrappers.proto in the pool)
)
from google.protobuf.message import Message
from tensorflow_serving.config import model_server_config_pb2

from tfs_model_server.errors import invalid_argument

_F = descriptor_pb2.FieldDescriptorProto
_FILE = "tfs_model_server/serving_configs.proto"


def declare_field(
    msg: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    ftype: int,
    type_name: str = "",
    repeated: bool = False,
) -> None:
    """Declare a field of `msg` (optional unless `repeated`)."""
    field = msg.field.add(name=name, number=number, type=ftype)
    if type_name:
        field.type_name = type_name
    field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL


def _build_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name=_FILE,
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    bp = fd.message_type.add(name="BatchingParameters")
    i64, s, b = (
        ".google.protobuf.Int64Value",
        ".google.protobuf.StringValue",
        ".google.protobuf.BoolValue",
    )
    declare_field(bp, "max_batch_size", 1, _F.TYPE_MESSAGE, i64)
    declare_field(bp, "batch_timeout_micros", 2, _F.TYPE_MESSAGE, i64)
    declare_field(bp, "max_enqueued_batches", 3, _F.TYPE_MESSAGE, i64)
    declare_field(bp, "num_batch_threads", 4, _F.TYPE_MESSAGE, i64)
    declare_field(bp, "thread_pool_name", 5, _F.TYPE_MESSAGE, s)
    declare_field(bp, "allowed_batch_sizes", 6, _F.TYPE_INT64, repeated=True)
    declare_field(bp, "pad_variable_length_inputs", 7, _F.TYPE_BOOL)
    declare_field(bp, "enable_large_batch_splitting", 8, _F.TYPE_MESSAGE, b)
    declare_field(bp, "max_execution_batch_size", 9, _F.TYPE_MESSAGE, i64)
    declare_field(bp, "batch_padding_policy", 10, _F.TYPE_STRING)
    pc = fd.message_type.add(name="PrometheusConfig")
    declare_field(pc, "enable", 1, _F.TYPE_BOOL)
    declare_field(pc, "path", 2, _F.TYPE_STRING)
    mc = fd.message_type.add(name="MonitoringConfig")
    declare_field(
        mc, "prometheus_config", 1, _F.TYPE_MESSAGE, ".tensorflow.serving.PrometheusConfig"
    )
    ssl = fd.message_type.add(name="SSLConfig")
    declare_field(ssl, "server_key", 1, _F.TYPE_STRING)
    declare_field(ssl, "server_cert", 2, _F.TYPE_STRING)
    declare_field(ssl, "custom_ca", 3, _F.TYPE_STRING)
    declare_field(ssl, "client_verify", 4, _F.TYPE_BOOL)
    return fd


def declared_messages(
    build: Callable[[], descriptor_pb2.FileDescriptorProto],
    file_name: str,
    package: str,
    names: Sequence[str],
) -> dict[str, Any]:
    """The classes of `package`'s messages `names`, declared by the file `build` makes (added
    to the default pool once: a second call finds it there)."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file_name)
    except KeyError:
        pool.Add(build())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name in names
    }


_CLASSES = declared_messages(
    _build_file,
    _FILE,
    "tensorflow.serving",
    ("BatchingParameters", "PrometheusConfig", "MonitoringConfig", "SSLConfig"),
)
BatchingParameters = _CLASSES["BatchingParameters"]
MonitoringConfig = _CLASSES["MonitoringConfig"]
SSLConfig = _CLASSES["SSLConfig"]
ModelServerConfig = model_server_config_pb2.ModelServerConfig


def parse_text(path: str | Path, message_class: type[Message], what: str) -> Any:
    """Parse a text-format proto file; a bad file is INVALID_ARGUMENT naming the file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise invalid_argument(f"Failed to read {what} file {path}: {exc.strerror}") from exc
    message = message_class()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        print(parse_error_line(message_class, exc), file=sys.stderr, flush=True)
        raise invalid_argument(f"Invalid protobuf file: '{path}'") from exc
    return message


def parse_error_line(message_class: type[Message], exc: text_format.ParseError) -> str:
    """The line protobuf's C++ text parser logs for a file TF Serving cannot parse:
    `Error parsing text-format <full name>: <line>:<column>: <reason>`."""
    reason = str(exc)
    if exc.GetLine() is not None:  # Python's ParseError reads "line:column : reason"
        reason = reason.partition(" : ")[2] or reason
    where = f"{exc.GetLine()}:{exc.GetColumn()}: " if exc.GetLine() is not None else ""
    return f"Error parsing text-format {message_class.DESCRIPTOR.full_name}: {where}{reason}"


def read_model_server_config(path: str | Path) -> model_server_config_pb2.ModelServerConfig:
    """A model config file; it must hold a model_config_list (a custom_model_config is refused
    as TF Serving's ServerCore refuses it: it has no custom config loader)."""
    config = parse_text(path, ModelServerConfig, "model config")
    if config.WhichOneof("config") == "custom_model_config":
        raise invalid_argument("Missing custom_model_config_loader in ServerCore Options")
    if config.WhichOneof("config") != "model_config_list":
        raise invalid_argument("ModelServerConfig must hold a model_config_list")
    return config


def read_batching_parameters(path: str | Path):
    return parse_text(path, BatchingParameters, "batching parameters")


def read_monitoring_config(path: str | Path):
    return parse_text(path, MonitoringConfig, "monitoring config")


def read_ssl_config(path: str | Path):
    return parse_text(path, SSLConfig, "SSL config")
