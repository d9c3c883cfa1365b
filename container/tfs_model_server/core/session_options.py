"""The ConfigProto every servable's Session is created with, built as TF Serving builds it.

TF Serving (server.cc, BuildAndStart) starts from `--tensorflow_session_config_file` (a
text-format ConfigProto), then always overwrites the GPU memory fraction with
`--per_process_gpu_memory_fraction` and both thread counts with the flags: with
`--tensorflow_intra_op_parallelism` and `--tensorflow_inter_op_parallelism` when either is
set, else with `--tensorflow_session_parallelism` (0 = TF chooses). So a thread count in the
file never takes effect; every other field (thread spinning, graph options, timeouts ...)
does. Setting all three thread flags is refused with TF Serving's text.

`--mixed_precision=bfloat16` turns on TF's oneDNN bfloat16 auto mixed precision rewrite (TF
applies it where the CPU supports bfloat16); another value is logged and ignored, as in TF
Serving (saved_model_bundle_factory.cc).

This server also always turns on `allow_soft_placement`, so a model exported with GPU
placements runs on CPU.
"""

from __future__ import annotations

import logging

from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

from tfs_model_server.core.config_protos import parse_text
from tfs_model_server.errors import invalid_argument
from tfs_model_server.options import ServerOptions

log = logging.getLogger(__name__)

ALL_THREAD_FLAGS = (
    "Either configure server_options.tensorflow_session_parallelism or "
    "(server_options.tensorflow_intra_op_parallelism, "
    "server_options.tensorflow_inter_op_parallelism) separately. You cannot configure all."
)


def thread_counts(options: ServerOptions) -> tuple[int, int]:
    """(intra, inter) op threads from the three thread flags, as TF Serving picks them."""
    intra = options.tensorflow_intra_op_parallelism
    inter = options.tensorflow_inter_op_parallelism
    whole = options.tensorflow_session_parallelism
    if intra > 0 and inter > 0 and whole > 0:
        raise invalid_argument(ALL_THREAD_FLAGS)
    if intra > 0 or inter > 0:
        return intra, inter
    return whole, whole


def session_config(options: ServerOptions) -> config_pb2.ConfigProto:
    """The file's ConfigProto (if any), with the flags' overrides and soft placement."""
    path, proto = options.tensorflow_session_config_file, config_pb2.ConfigProto
    config = parse_text(path, proto, "session config") if path else proto()
    config.allow_soft_placement = True
    config.gpu_options.per_process_gpu_memory_fraction = options.per_process_gpu_memory_fraction
    intra, inter = thread_counts(options)
    config.intra_op_parallelism_threads = intra
    config.inter_op_parallelism_threads = inter
    if options.mixed_precision == "bfloat16":
        log.info("Running inference with bfloat16 auto mixed precision")
        rewrites = config.graph_options.rewrite_options
        rewrites.auto_mixed_precision_onednn_bfloat16 = rewriter_config_pb2.RewriterConfig.ON
    elif options.mixed_precision:
        log.warning(
            "%s auto mixed precision is not supported. Valid option: bfloat16",
            options.mixed_precision,
        )
    return config
