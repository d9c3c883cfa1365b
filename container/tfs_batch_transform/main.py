"""`tfs-batch-transform`: a SageMaker Batch Transform job on this machine.

Exit codes: 0 every input transformed, 1 some inputs failed (see the failure report),
2 bad arguments, 3 the job could not run (container, input or output unavailable), 130 Ctrl-C,
143 SIGTERM (both stop the job's container and remove its folder; --resume finishes the job).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from process_utils.arguments import ArgumentParser
from sagemaker_serving.config.batch_parameters import (
    BATCH_STRATEGIES,
    DEFAULT_BATCH_STRATEGY,
    MAX_PAYLOAD_IN_MB,
)

from .assembly import ASSEMBLE_WITH
from .data_processing import JOIN_SOURCES
from .framing import SPLIT_TYPES
from .job import (
    DEFAULT_INVOCATIONS_TIMEOUT,
    DEFAULT_MAX_RETRIES,
    ConfigError,
    JobConfig,
    JobSummary,
    run_job,
)
from .progress import make_progress
from .sagemaker_request import (
    DEFAULT_INSTANCE_TYPE,
    SageMakerTarget,
    default_job_name,
    transform_job_request,
)

log = logging.getLogger("tfs_batch_transform")

EXAMPLES = """examples:
  tfs-batch-transform --model-dir run/models --input data/ --output out/ \\
      --content-type text/csv --accept text/csv --split-type Line --assemble-with Line
  tfs-batch-transform --endpoint http://localhost:8080 --input images/ --output out/ \\
      --content-type application/x-image
  tfs-batch-transform --endpoint http://localhost:8080 --input s3://bucket/in/ \\
      --output s3://bucket/out/ --split-type TFRecord --batch-strategy MultiRecord \\
      --content-type application/x-tfexample --accept application/jsonlines --resume
  tfs-batch-transform --input s3://bucket/in/ --output s3://bucket/out/ --split-type Line \\
      --content-type text/csv --model-name my-model --print-sagemaker-request \\
      > job.json   # aws sagemaker create-transform-job --cli-input-json file://job.json
"""


class Terminated(KeyboardInterrupt):
    """SIGTERM: the job stops as on Ctrl-C, unwinding (its container stopped, its folder
    removed) instead of dying where it stands."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _int_range(low: int, high: int | None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"{low}..{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{value} is not in {bounds}")
        return value

    return parse


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tfs-batch-transform",
        description="Run a SageMaker Batch Transform job locally, with SageMaker's splitting, "
        "batching, assembly, DataProcessing and failure semantics.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = parser.add_mutually_exclusive_group()  # one is required unless printing
    target.add_argument(
        "--endpoint",
        action="append",
        metavar="URL",
        help="a running container (repeat: several containers share the inputs like instances)",
    )
    target.add_argument(
        "--model-dir", type=Path, help="start the container (`serve`) on this model directory"
    )
    parser.add_argument(
        "--env",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="with --model-dir: an environment variable for the container (repeatable); "
        "with --print-sagemaker-request: the job's Environment",
    )
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", required=True, help="a file, a directory or s3://bucket/prefix")
    io.add_argument("--output", required=True, help="a directory or s3://bucket/prefix")
    io.add_argument("--s3-endpoint-url", help="S3-compatible endpoint (else AWS_ENDPOINT_URL)")
    io.add_argument(
        "--resume", action="store_true", help="skip inputs whose .out output already exists"
    )
    sm = parser.add_argument_group("SageMaker job parameters")
    sm.add_argument("--content-type", help="TransformInput.ContentType (request Content-Type)")
    sm.add_argument("--accept", help="TransformOutput.Accept (request Accept)")
    sm.add_argument("--split-type", choices=SPLIT_TYPES, default="None")
    sm.add_argument(
        "--batch-strategy",
        choices=BATCH_STRATEGIES,
        help=f"default: /execution-parameters, else {DEFAULT_BATCH_STRATEGY}",
    )
    sm.add_argument(
        "--max-payload-in-mb",
        type=_int_range(0, MAX_PAYLOAD_IN_MB),
        metavar="MB",
        help="0..100 MiB, 0 = unlimited, sent chunked (default: /execution-parameters, else 6)",
    )
    sm.add_argument(
        "--max-concurrent-transforms",
        type=_int_range(0, None),
        metavar="N",
        help="open requests per endpoint (default: /execution-parameters, else 1)",
    )
    sm.add_argument("--assemble-with", choices=ASSEMBLE_WITH, default="None")
    sm.add_argument("--input-filter", default="$", metavar="JSONPATH")
    sm.add_argument("--output-filter", default="$", metavar="JSONPATH")
    sm.add_argument("--join-source", choices=JOIN_SOURCES, default="None")
    sm.add_argument(
        "--invocations-timeout",
        type=_int_range(1, 3600),
        default=DEFAULT_INVOCATIONS_TIMEOUT,
        metavar="SECONDS",
        help=f"per request (InvocationsTimeoutInSeconds, default {DEFAULT_INVOCATIONS_TIMEOUT})",
    )
    sm.add_argument(
        "--max-retries",
        type=_int_range(0, 3),
        default=DEFAULT_MAX_RETRIES,
        help="retries of 5xx, 429 and connection errors (InvocationsMaxRetries, default "
        f"{DEFAULT_MAX_RETRIES})",
    )
    run = parser.add_argument_group("running")
    run.add_argument(
        "--startup-timeout",
        type=_int_range(1, None),
        default=300,
        metavar="SECONDS",
        help="wait this long for /ping to answer 200 (default 300)",
    )
    run.add_argument("--progress", choices=("auto", "bar", "log"), default="auto")
    run.add_argument("--progress-interval", type=float, default=10.0, metavar="SECONDS")
    run.add_argument("--summary-json", type=Path, help="write the job summary here as JSON")
    run.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    _add_sagemaker_arguments(parser)
    return parser


def _add_sagemaker_arguments(parser: argparse.ArgumentParser) -> None:
    sm = parser.add_argument_group("on SageMaker (--print-sagemaker-request)")
    sm.add_argument(
        "--print-sagemaker-request",
        action="store_true",
        help="print the CreateTransformJob request for this job (JSON) and exit; "
        "--input and --output must be s3:// URIs",
    )
    sm.add_argument("--model-name", help="the SageMaker model (create-model) the job uses")
    sm.add_argument("--job-name", help="default: tfs-batch-transform-<UTC date-time>")
    sm.add_argument("--instance-type", default=DEFAULT_INSTANCE_TYPE)
    sm.add_argument("--instance-count", type=_int_range(1, None), default=1, metavar="N")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    return JobConfig(
        input=args.input,
        output=args.output,
        endpoints=args.endpoint or [],
        model_dir=args.model_dir,
        container_env=dict(args.env),
        content_type=args.content_type,
        accept=args.accept,
        split_type=args.split_type,
        batch_strategy=args.batch_strategy,
        max_payload_in_mb=args.max_payload_in_mb,
        max_concurrent_transforms=args.max_concurrent_transforms,
        assemble_with=args.assemble_with,
        input_filter=args.input_filter,
        output_filter=args.output_filter,
        join_source=args.join_source,
        invocations_timeout=args.invocations_timeout,
        max_retries=args.max_retries,
        resume=args.resume,
        s3_endpoint_url=args.s3_endpoint_url,
        startup_timeout=args.startup_timeout,
    )


def _report(summary: JobSummary) -> None:
    log.info(
        "%d inputs: %d transformed, %d failed, %d skipped (resume); %d records, %d requests "
        "(%d retries) in %.1f s (%.1f records/s; start-up %.1f s)",
        summary.files,
        summary.succeeded,
        summary.failed,
        summary.skipped,
        summary.records,
        summary.requests,
        summary.retries,
        summary.seconds,
        summary.records_per_second,
        summary.startup_seconds,
    )
    if summary.failure_report:
        log.error("failure report: %s", summary.failure_report)


def _print_sagemaker_request(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Print the CreateTransformJob request (exit 0) or a flag error (exit 2); runs nothing."""
    if not args.model_name:
        parser.error("argument --model-name: required with --print-sagemaker-request")
    job_name = args.job_name or default_job_name()
    target = SageMakerTarget(args.model_name, job_name, args.instance_type, args.instance_count)
    try:
        request = transform_job_request(config_from_args(args), target)
    except ConfigError as err:
        parser.error(f"argument {err.option}: {err.message}")
    print(json.dumps(request, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.print_sagemaker_request:
        return _print_sagemaker_request(parser, args)
    if not (args.endpoint or args.model_dir):
        parser.error("one of the arguments --endpoint --model-dir is required")
    if args.env and not args.model_dir:
        parser.error("argument --env: only with --model-dir")
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = config_from_args(args)
    try:
        config.validate()
    except ConfigError as err:
        parser.error(f"argument {err.option}: {err.message}")
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        summary = run_job(config, make_progress(args.progress, args.progress_interval))
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        log.error(
            "%s; run again with --resume to finish the job",
            "terminated" if terminated else "interrupted",
        )
        return 143 if terminated else 130
    except Exception as err:
        log.error("the job could not run: %s", err)
        return 3
    finally:
        signal.signal(signal.SIGTERM, previous)
    _report(summary)
    if args.summary_json:
        args.summary_json.write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
