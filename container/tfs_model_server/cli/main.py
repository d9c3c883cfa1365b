"""`tfs-model-server`: the tensorflow_model_server command line."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from tfs_model_server import __version__
from tfs_model_server.cli import flags
from tfs_model_server.cli.tf_import import load_runtime
from tfs_model_server.cli.tf_noise import quiet_cpu_start
from tfs_model_server.errors import ServingError


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d: %(levelname).1s %(name)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )


USAGE_ERROR = START_FAILED = 255  # TF Serving's main() returns -1 for both


def start_failed(exc: ServingError | OSError) -> int:
    """TF Serving's line for a server that did not start, on stdout; the exit code."""
    status = exc.status_text() if isinstance(exc, ServingError) else f"UNKNOWN: {exc}"
    print(f"Failed to start server. Error: {status}", flush=True)
    return START_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, then load models and serve; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "--helpfull"):
        print(flags.usage())
        return 0  # asked for, so no error (TF Serving's returns -1: 255)
    try:
        options = flags.parse(args)
        if options.unknown and not options.version:  # TF names the first and goes on
            print(f"unknown argument: {options.unknown[0]}\n{flags.usage()}")
        flags.validate(options)
    except flags.FlagError as exc:
        # as TF Serving: what was wrong on stderr, the usage on stdout, exit code -1 (255)
        print(exc, file=sys.stderr)
        print(flags.usage())
        return USAGE_ERROR
    except ServingError as exc:
        return start_failed(exc)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    with quiet_cpu_start():
        runtime = load_runtime()
    if options.version:
        print(f"TensorFlow ModelServer: tfs-model-server {__version__} (TensorFlow Python runtime)")
        print(f"TensorFlow Library: {runtime.version}")
        return 0
    _configure_logging()
    runtime.get_logger().setLevel(logging.ERROR)
    from tfs_model_server import server

    try:
        server.check_files(options)
        server.run(options)
    except (ServingError, OSError) as exc:
        return start_failed(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
