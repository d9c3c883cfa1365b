"""--tensorflow_session_config_file and the thread flags, combined as TF Serving combines them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfs_model_server.cli import flags
from tfs_model_server.core.session_options import ALL_THREAD_FLAGS, session_config, thread_counts
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.options import ServerOptions


def _options(*args: str) -> ServerOptions:
    options = flags.parse(["--model_base_path=/m", *args])
    flags.validate(options)
    return options


def test_without_a_file_tf_picks_the_threads_and_placement_is_soft() -> None:
    config = session_config(_options())
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (0, 0)
    assert config.allow_soft_placement
    assert not config.experimental.disable_thread_spinning


def test_the_file_sets_every_field_but_the_ones_the_flags_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "session.config"
    path.write_text(
        "intra_op_parallelism_threads: 7\n"
        "inter_op_parallelism_threads: 5\n"
        "operation_timeout_in_ms: 5000\n"
        "gpu_options { per_process_gpu_memory_fraction: 0.5 allow_growth: true }\n"
        "experimental { disable_thread_spinning: true }\n"
    )
    config = session_config(_options(f"--tensorflow_session_config_file={path}"))
    assert config.experimental.disable_thread_spinning
    assert config.operation_timeout_in_ms == 5000
    assert config.gpu_options.allow_growth
    # TF Serving always writes the thread flags (0 = TF chooses) and the GPU memory fraction
    # flag over the file's values
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (0, 0)
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.0
    assert config.allow_soft_placement
    config = session_config(
        _options(
            f"--tensorflow_session_config_file={path}",
            "--tensorflow_intra_op_parallelism=2",
            "--per_process_gpu_memory_fraction=0.25",
        )
    )
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (2, 0)
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.25
    assert config.experimental.disable_thread_spinning


@pytest.mark.parametrize(
    ("intra", "inter", "whole", "expected"),
    [
        (0, 0, 0, (0, 0)),
        (0, 0, 4, (4, 4)),
        (2, 0, 0, (2, 0)),
        (0, 3, 0, (0, 3)),
        (2, 3, 0, (2, 3)),
        (2, 0, 4, (2, 0)),  # one of intra/inter set: session parallelism is not used
        (0, 3, 4, (0, 3)),
    ],
)
def test_thread_counts(intra: int, inter: int, whole: int, expected: tuple[int, int]) -> None:
    options = _options(
        f"--tensorflow_intra_op_parallelism={intra}",
        f"--tensorflow_inter_op_parallelism={inter}",
        f"--tensorflow_session_parallelism={whole}",
    )
    assert thread_counts(options) == expected


def test_all_three_thread_flags_are_refused_with_tf_servings_text() -> None:
    options = _options(
        "--tensorflow_intra_op_parallelism=2",
        "--tensorflow_inter_op_parallelism=2",
        "--tensorflow_session_parallelism=2",
    )
    with pytest.raises(ServingError) as info:
        session_config(options)
    assert (info.value.code, info.value.message) == (Code.INVALID_ARGUMENT, ALL_THREAD_FLAGS)


@pytest.mark.parametrize(
    "text",
    [
        "no_such_field: 1\n",
        "operation_timeout_in_ms: 1\noperation_timeout_in_ms: 2\n",  # as C++ ParseFromString
        "experimental { disable_thread_spinning: maybe }\n",
    ],
)
def test_a_file_that_does_not_parse_is_tf_servings_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "session.config"
    path.write_text(text)
    with pytest.raises(ServingError) as info:
        session_config(_options(f"--tensorflow_session_config_file={path}"))
    assert info.value.message == f"Invalid protobuf file: '{path}'"


def test_the_flag_is_no_longer_ignored() -> None:
    options = _options("--tensorflow_session_config_file=/s.config")
    assert options.tensorflow_session_config_file == "/s.config"
    assert "tensorflow_session_config_file" not in options.ignored
    assert '--tensorflow_session_config_file=""' in flags.usage()


def test_mixed_precision_bfloat16_turns_on_the_onednn_rewrite(caplog) -> None:
    from tensorflow.core.protobuf import rewriter_config_pb2

    on = rewriter_config_pb2.RewriterConfig.ON
    rewrites = session_config(_options("--mixed_precision=bfloat16")).graph_options.rewrite_options
    assert rewrites.auto_mixed_precision_onednn_bfloat16 == on
    assert session_config(_options()).graph_options.rewrite_options.ListFields() == []
    with caplog.at_level("WARNING"):
        config = session_config(_options("--mixed_precision=float16"))
    assert config.graph_options.rewrite_options.ListFields() == []
    assert "float16 auto mixed precision is not supported. Valid option: bfloat16" in caplog.text
