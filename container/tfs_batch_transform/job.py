"""A Batch Transform job: `run_job(JobConfig(...))` -> JobSummary.

Inputs are shared by the endpoints as objects are by a job's instances: each endpoint takes the
next input object in key order and sends its mini-batches with up to MaxConcurrentTransforms
requests open; responses are kept in record order and the object's output is written whole
when its last batch answers. An object with any failed request (or bad framing, or a record
over MaxPayloadInMB) gets no output and is listed, with the reason, in the failure report
(tfs-batch-transform-failures.json beside the outputs).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagemaker_serving.config.batch_parameters import (
    BATCH_STRATEGIES,
    CONTAINER_SPELLING,
    MAX_PAYLOAD_IN_MB,
    MAX_TOTAL_PAYLOAD_IN_MB,
)

from .assembly import ASSEMBLE_WITH, FilePlan
from .client import Endpoint, InvocationError
from .container import LocalContainer
from .data_processing import JOIN_SOURCES, DataProcessing
from .framing import SPLIT_TYPES
from .packing import payload_limit_bytes
from .parameters import Parameters, resolve
from .progress import Progress, make_progress
from .sources import (
    OUTPUT_SUFFIX,
    InputObject,
    InputStore,
    OutputStore,
    is_s3,
    open_input,
    open_output,
    split_s3_url,
)

log = logging.getLogger(__name__)

FAILURE_REPORT = "tfs-batch-transform-failures.json"
DEFAULT_INVOCATIONS_TIMEOUT = 600  # ModelClientConfig.InvocationsTimeoutInSeconds
DEFAULT_MAX_RETRIES = 3  # ModelClientConfig.InvocationsMaxRetries


class ConfigError(ValueError):
    """A job setting that is invalid; `option` names it (e.g. `--split-type`)."""

    def __init__(self, option: str, message: str):
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


@dataclass
class JobConfig:
    """A job, in SageMaker's terms. `None` parameters come from /execution-parameters."""

    input: str
    output: str
    endpoints: list[str] = field(default_factory=list)
    model_dir: Path | None = None
    container_env: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    accept: str | None = None
    split_type: str = "None"
    batch_strategy: str | None = None
    max_payload_in_mb: int | None = None
    max_concurrent_transforms: int | None = None
    assemble_with: str = "None"
    input_filter: str = "$"
    output_filter: str = "$"
    join_source: str = "None"
    invocations_timeout: float = DEFAULT_INVOCATIONS_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    resume: bool = False
    s3_endpoint_url: str | None = None
    startup_timeout: float = 300.0

    def validate(self) -> DataProcessing:
        """Check the settings as CreateTransformJob would; the compiled DataProcessing."""
        if bool(self.endpoints) == (self.model_dir is not None):
            raise ConfigError("--endpoint/--model-dir", "give endpoint URLs or a model directory")
        checks = [
            ("--split-type", self.split_type, SPLIT_TYPES),
            ("--assemble-with", self.assemble_with, ASSEMBLE_WITH),
            ("--join-source", self.join_source, JOIN_SOURCES),
        ]
        if self.batch_strategy is not None:
            checks.append(("--batch-strategy", self.batch_strategy, BATCH_STRATEGIES))
        for option, value, allowed in checks:
            if value not in allowed:
                raise ConfigError(option, f"{value!r} is not one of {', '.join(allowed)}")
        if self.max_payload_in_mb is not None and not (
            0 <= self.max_payload_in_mb <= MAX_PAYLOAD_IN_MB
        ):
            raise ConfigError("--max-payload-in-mb", f"must be 0..{MAX_PAYLOAD_IN_MB}")
        if self.max_concurrent_transforms is not None and self.max_concurrent_transforms < 0:
            raise ConfigError("--max-concurrent-transforms", "must be >= 0 (0: the container's)")
        if (
            self.max_payload_in_mb
            and self.max_concurrent_transforms
            and self.max_payload_in_mb * self.max_concurrent_transforms > MAX_TOTAL_PAYLOAD_IN_MB
        ):
            total = self.max_payload_in_mb * self.max_concurrent_transforms
            raise ConfigError(
                "--max-concurrent-transforms",
                f"{self.max_concurrent_transforms} x --max-payload-in-mb "
                f"{self.max_payload_in_mb} = {total} MB, over SageMaker's "
                f"{MAX_TOTAL_PAYLOAD_IN_MB} MB",
            )
        if not 1 <= self.invocations_timeout <= 3600:
            raise ConfigError("--invocations-timeout", "must be 1..3600 seconds")
        if not 0 <= self.max_retries <= 3:
            raise ConfigError("--max-retries", "must be 0..3")
        self._check_locations()
        return self._data_processing()

    def _data_processing(self) -> DataProcessing:
        for option, path in (
            ("--input-filter", self.input_filter),
            ("--output-filter", self.output_filter),
        ):
            try:
                DataProcessing.create(path, "$", "None", "application/json")
            except ValueError as err:
                raise ConfigError(option, str(err)) from None
        if self.join_source == "Input":
            if self.assemble_with != self.split_type:
                raise ConfigError(
                    "--join-source", "Input needs --assemble-with equal to --split-type"
                )
            if (self.accept or "") != (self.content_type or ""):
                raise ConfigError("--join-source", "Input needs --accept equal to --content-type")
        try:
            processing = DataProcessing.create(
                self.input_filter, self.output_filter, self.join_source, self.content_type or ""
            )
        except ValueError as err:
            raise ConfigError("--content-type", str(err)) from None
        if processing.codec is not None and processing.codec.csv and self.split_type != "Line":
            raise ConfigError("--split-type", "data processing of CSV needs Line")
        return processing

    def _check_locations(self) -> None:
        inp, out = self.input, self.output
        if is_s3(inp) and is_s3(out):
            (ib, ip), (ob, op) = split_s3_url(inp), split_s3_url(out)
            inside = ib == ob and op.startswith(ip)
        elif not is_s3(inp) and not is_s3(out):
            source, target = Path(inp).resolve(), Path(out).resolve()
            inside = source.is_dir() and target.is_relative_to(source)
        else:
            inside = False
        if inside:
            raise ConfigError("--output", f"{out} is inside the input {inp}")


@dataclass
class FileFailure:
    input: str
    error: str
    status: int | None = None
    records: int | None = None


@dataclass
class JobSummary:
    """What a job did: counts, timings, the parameters used and the failed inputs."""

    files: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    records: int = 0
    requests: int = 0
    retries: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    startup_seconds: float = 0.0
    seconds: float = 0.0
    parameters: dict[str, Any] = field(default_factory=dict)
    failures: list[FileFailure] = field(default_factory=list)
    failure_report: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "records_per_second": round(self.records_per_second, 3)}


class _Task:
    """One input object in flight: responses in batch order, and whether it failed."""

    def __init__(self, obj: InputObject, plan: FilePlan):
        self.obj, self.plan = obj, plan
        self.responses: list[bytes | None] = [None] * len(plan.batches)
        self.pending = len(plan.batches)
        self.failure: FileFailure | None = None
        self.bytes_done = 0.0  # progress already reported for this object
        self.lock = threading.Lock()

    def fail(self, failure: FileFailure) -> None:
        with self.lock:
            self.failure = self.failure or failure

    def settle(self, batches: int) -> bool:
        """Count `batches` as finished; True for the call that finishes the object."""
        with self.lock:
            self.pending -= batches
            return self.pending == 0


class _Job:
    def __init__(
        self,
        config: JobConfig,
        processing: DataProcessing,
        params: Parameters,
        source: InputStore,
        sink: OutputStore,
        progress: Progress,
    ):
        self.config, self.processing, self.params = config, processing, params
        self.source, self.sink, self.progress = source, sink, progress
        self.limit = payload_limit_bytes(params.max_payload_in_mb)
        self.headers = {
            name: value
            for name, value in (("Content-Type", config.content_type), ("Accept", config.accept))
            if value
        }
        self.summary = JobSummary()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self._queue: Iterator[InputObject] = iter(())

    def run(self, objects: list[InputObject], endpoints: list[Endpoint]) -> None:
        self._queue = iter(objects)
        pools = [
            ThreadPoolExecutor(self.params.max_concurrent_transforms, f"invoke-{i}")
            for i in range(len(endpoints))
        ]
        feeders = [
            threading.Thread(target=self._feed, args=(ep, pool), name=f"feed-{i}", daemon=True)
            for i, (ep, pool) in enumerate(zip(endpoints, pools, strict=True))
        ]
        try:
            for feeder in feeders:
                feeder.start()
            for feeder in feeders:
                while feeder.is_alive():
                    feeder.join(0.5)
            for pool in pools:
                pool.shutdown(wait=True)
        except BaseException:
            self.stop.set()
            for pool in pools:
                pool.shutdown(wait=False, cancel_futures=True)
            raise

    def _next(self) -> InputObject | None:
        with self.lock:
            return None if self.stop.is_set() else next(self._queue, None)

    def _feed(self, endpoint: Endpoint, pool: ThreadPoolExecutor) -> None:
        """Take objects one after another; submit each batch when a request slot is free."""
        slots = threading.BoundedSemaphore(self.params.max_concurrent_transforms)
        while (obj := self._next()) is not None:
            try:
                plan = FilePlan(
                    self.source.read(obj.key),
                    self.config.split_type,
                    self.params.batch_strategy,
                    self.limit,
                    self.config.assemble_with,
                    self.processing,
                )
            except Exception as err:
                self._finish_failed(obj, FileFailure(obj.key, f"{type(err).__name__}: {err}"))
                continue
            task = _Task(obj, plan)
            if not plan.batches:
                self._finish(task)
                continue
            submitted = 0
            for index in range(len(plan.batches)):
                if task.failure or not self._acquire(slots):
                    break
                try:
                    pool.submit(self._send, endpoint, task, index, slots)
                except RuntimeError:  # the pool was shut down: the job is being interrupted
                    slots.release()
                    break
                submitted += 1
            unsent = len(plan.batches) - submitted
            if unsent and task.settle(unsent):
                self._finish(task)

    def _acquire(self, slots: threading.BoundedSemaphore) -> bool:
        """A request slot; False when the job is being stopped."""
        while not slots.acquire(timeout=0.5):
            if self.stop.is_set():
                return False
        if self.stop.is_set():
            slots.release()
            return False
        return True

    def _send(
        self, endpoint: Endpoint, task: _Task, index: int, slots: threading.BoundedSemaphore
    ) -> None:
        batch = task.plan.batches[index]
        try:
            if not (task.failure or self.stop.is_set()):
                reply = endpoint.invoke(
                    task.plan.body(batch),
                    self.headers,
                    self.config.invocations_timeout,
                    chunked=self.limit is None,
                )
                task.responses[index] = reply.body
                self._count(requests=reply.attempts, retries=reply.attempts - 1)
                share = task.obj.size * batch.count / task.plan.records
                with task.lock:
                    task.bytes_done += share
                self.progress.advance(batch.count, share)
        except InvocationError as err:
            self._count(requests=err.attempts, retries=err.attempts - 1)
            where = (
                f"records {batch.start}..{batch.stop - 1}"
                if batch.count > 1
                else f"record {batch.start}"
            )
            task.fail(FileFailure(task.obj.key, f"{where}: {err}", err.status, task.plan.records))
        except Exception as err:  # never lose an object: any error fails it
            task.fail(FileFailure(task.obj.key, f"{type(err).__name__}: {err}"))
        finally:
            slots.release()
        if task.settle(1):
            self._finish(task)

    def _finish(self, task: _Task) -> None:
        """Write the object's output, or record its failure (and remove a stale output)."""
        key = task.obj.key + OUTPUT_SUFFIX
        if task.failure is None and self.stop.is_set():
            return  # interrupted: neither done nor failed; a resumed job sends it again
        if task.failure is None:
            try:
                data = task.plan.assemble([r or b"" for r in task.responses])
                self.sink.write(key, data)
            except Exception as err:
                task.failure = FileFailure(task.obj.key, f"{type(err).__name__}: {err}")
            else:
                self._count(succeeded=1, records=task.plan.records, output_bytes=len(data))
                self.progress.file_done(failed=False)
                return
        task.failure.records = task.plan.records
        self._finish_failed(task.obj, task.failure, task.bytes_done)

    def _finish_failed(self, obj: InputObject, failure: FileFailure, bytes_done: float = 0) -> None:
        log.error("FAILED %s: %s", obj.key, failure.error)
        with contextlib.suppress(Exception):
            self.sink.delete(obj.key + OUTPUT_SUFFIX)
        with self.lock:
            self.summary.failed += 1
            self.summary.failures.append(failure)
        self.progress.advance(0, obj.size - bytes_done)
        self.progress.file_done(failed=True)

    def _count(self, **counts: int) -> None:
        with self.lock:
            for name, value in counts.items():
                setattr(self.summary, name, getattr(self.summary, name) + value)


def run_job(config: JobConfig, progress: Progress | None = None) -> JobSummary:
    """Run a Batch Transform job; the summary says what happened (`summary.ok`: no failures).

    With `config.model_dir` the container is started natively for the job and always stopped.
    Raises ConfigError for invalid settings, and the error of a container that does not start.
    """
    processing = config.validate()
    # the input and the output first: a missing one fails at once, not after the start-up
    source = open_input(config.input, config.s3_endpoint_url)
    objects = source.list()
    sink = open_output(config.output, config.s3_endpoint_url)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        urls = list(config.endpoints)
        container = None
        if config.model_dir is not None:
            container = LocalContainer(
                Path(config.model_dir), _container_env(config), config.startup_timeout
            )
            stack.enter_context(container)
            urls = [container.url]
        endpoints = [Endpoint(url, config.max_retries) for url in urls]
        for endpoint in endpoints:
            endpoint.wait_healthy(config.startup_timeout)
        startup = time.monotonic() - started
        params = resolve(
            config.max_concurrent_transforms,
            config.batch_strategy,
            config.max_payload_in_mb,
            endpoints[0].execution_parameters(),
        )
        log.info("parameters: %s", _describe(params))
        inputs = Inputs(source, objects, sink)
        summary = _transform(config, processing, params, endpoints, progress, inputs, startup)
        if container is not None and not summary.ok:
            container.keep_log = True  # the log the job named at the start, for its failures
        return summary


@dataclass(frozen=True)
class Inputs:
    """The job's input (listed) and output stores."""

    source: InputStore
    objects: list[InputObject]
    sink: OutputStore


def _transform(
    config: JobConfig,
    processing: DataProcessing,
    params: Parameters,
    endpoints: list[Endpoint],
    progress: Progress | None,
    inputs: Inputs,
    startup_seconds: float = 0.0,
) -> JobSummary:
    source, objects, sink = inputs.source, inputs.objects, inputs.sink
    sink.cleanup()
    done = sink.existing() if config.resume else set()
    todo = [obj for obj in objects if obj.key + OUTPUT_SUFFIX not in done]
    progress = progress or make_progress()
    job = _Job(config, processing, params, source, sink, progress)
    job.summary.files = len(objects)
    job.summary.startup_seconds = round(startup_seconds, 3)
    job.summary.skipped = len(objects) - len(todo)
    job.summary.input_bytes = sum(obj.size for obj in todo)
    job.summary.parameters = {
        "MaxConcurrentTransforms": params.max_concurrent_transforms,
        "BatchStrategy": params.batch_strategy,
        "MaxPayloadInMB": params.max_payload_in_mb,
        "sources": dict(params.sources),
        "endpoints": [endpoint.url for endpoint in endpoints],
    }
    if job.summary.skipped:
        log.info(
            "resume: %d of %d inputs already have their output", job.summary.skipped, len(objects)
        )
    started = time.monotonic()
    progress.start(len(todo), job.summary.input_bytes)
    try:
        job.run(todo, endpoints)
    finally:
        progress.close()
    summary = job.summary
    summary.seconds = round(time.monotonic() - started, 3)
    summary.failures.sort(key=lambda failure: failure.input)
    _write_report(sink, summary)
    return summary


def _write_report(sink: OutputStore, summary: JobSummary) -> None:
    """The failure report when inputs failed; a stale one is removed when none did."""
    if summary.ok:
        with contextlib.suppress(Exception):
            sink.delete(FAILURE_REPORT)
        return
    totals = summary.to_dict()
    totals.pop("failures")
    totals.pop("failure_report")  # this file: not known yet, and no news in it
    report = {"failed": [asdict(f) for f in summary.failures], "summary": totals}
    sink.write(FAILURE_REPORT, json.dumps(report, indent=2).encode() + b"\n")
    summary.failure_report = sink.location(FAILURE_REPORT)


def _container_env(config: JobConfig) -> dict[str, str]:
    """SageMaker passes the batch parameters to the container only when the job sets them."""
    env = dict(config.container_env)
    if config.max_payload_in_mb is not None:
        env.setdefault("SAGEMAKER_MAX_PAYLOAD_IN_MB", str(config.max_payload_in_mb))
    if config.batch_strategy is not None:
        env.setdefault("SAGEMAKER_BATCH_STRATEGY", CONTAINER_SPELLING[config.batch_strategy])
    if config.max_concurrent_transforms:
        env.setdefault("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", str(config.max_concurrent_transforms))
    return env


def _describe(params: Parameters) -> str:
    return ", ".join(
        f"{name}={value} ({params.sources[name]})"
        for name, value in (
            ("MaxConcurrentTransforms", params.max_concurrent_transforms),
            ("BatchStrategy", params.batch_strategy),
            ("MaxPayloadInMB", params.max_payload_in_mb),
        )
    )
