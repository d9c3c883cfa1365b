"""`tfs-model-server`: the tensorflow_model_server command line."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from tfs_model_server import __version__
from tfs_model_server.cli import flags
from tfs_model_server.cli.tf_import import load_runtime


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d: %(levelname).1s %(name)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, then load models and serve; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "--helpfull"):
        print(flags.usage())
        return 0
    try:
        options = flags.parse(args)
        flags.validate(options)
    except flags.FlagError as exc:
        print(f"{exc}\n{flags.usage()}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if options.version:
        runtime = load_runtime()
        print(f"TensorFlow ModelServer: tfs-model-server {__version__} (TensorFlow Python runtime)")
        print(f"TensorFlow Library: {runtime.version}")
        return 0
    _configure_logging()
    load_runtime().get_logger().setLevel(logging.ERROR)
    from tfs_model_server.core import server
    from tfs_model_server.core.errors import ServingError

    try:
        server.check_files(options)
    except ServingError as exc:
        print(f"Failed to start server. Error: {exc.message}", file=sys.stderr)
        return 1
    return server.run(options)


if __name__ == "__main__":
    sys.exit(main())
