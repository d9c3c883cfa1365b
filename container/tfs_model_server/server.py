"""Start-up and shutdown of one model server process, as tensorflow_model_server does it.

Start-up blocks until every configured model is AVAILABLE (a failed load ends the process),
then serves gRPC and REST until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn

from tfs_model_server.api.grpc_health import health_service
from tfs_model_server.api.grpc_server import start_grpc_server
from tfs_model_server.api.grpc_tls import server_credentials
from tfs_model_server.api.rest_api import RestApi
from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.batching.scheduler import SharedBatchScheduler
from tfs_model_server.core import config_protos
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.core.manager import ModelConfig, ModelManager
from tfs_model_server.core.servable import Servable
from tfs_model_server.core.session_options import session_config
from tfs_model_server.core.tflite_servable import TFLITE_FILE, TfLiteOptions, TfLiteServable
from tfs_model_server.core.warmup import run_warmup
from tfs_model_server.errors import Code, ServingError, code_of, not_found
from tfs_model_server.metrics import ServingMetrics
from tfs_model_server.options import ServerOptions, grpc_channel_arguments

log = logging.getLogger(__name__)

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"


QUEUE_FIELDS = (
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
)
THREAD_FIELDS = ("num_batch_threads", "thread_pool_name")
MODEL_BATCHING_FILE = "batching_params.pbtxt"  # in a version's SavedModel directory


def options_from(params: Any, fields: Sequence[str], **fixed: Any) -> BatchingOptions:
    """BatchingOptions from a BatchingParameters message: `fields` where set, then `fixed`,
    TF's scheduler defaults for the rest; checked as TF Serving checks them."""
    values: dict[str, Any] = {
        name: getattr(params, name).value for name in fields if params.HasField(name)
    }
    values["allowed_batch_sizes"] = tuple(params.allowed_batch_sizes)
    values["pad_variable_length_inputs"] = params.pad_variable_length_inputs
    result = BatchingOptions(**values, **fixed)
    result.validate()
    return result


def batching_options(options: ServerOptions) -> BatchingOptions:
    """BatchingOptions from --batching_parameters_file (TF scheduler defaults for unset fields)."""
    if not options.batching_parameters_file:
        return BatchingOptions()
    params = config_protos.read_batching_parameters(options.batching_parameters_file)
    return options_from(params, QUEUE_FIELDS + THREAD_FIELDS)


def model_batching(version_path: Path, shared: BatchingOptions) -> BatchingOptions | None:
    """--enable_per_model_batching_parameters: the version's own batching_params.pbtxt (its
    queue settings; the shared pool's threads), or None when it has none: not batched."""
    path = version_path / MODEL_BATCHING_FILE
    if not path.is_file():
        return None
    params = config_protos.read_batching_parameters(path)
    threads = {name: getattr(shared, name) for name in THREAD_FIELDS}
    return options_from(params, QUEUE_FIELDS, **threads)


def tflite_options(options: ServerOptions) -> TfLiteOptions:
    """Which versions are served from their model.tflite, and how (the TFLite flags)."""
    return TfLiteOptions(
        prefer=options.prefer_tflite_model,
        require=options.use_tflite_model,
        pools=options.num_tflite_pools,
        num_threads=options.tflite_num_threads,
        xnnpack=options.enable_tflite_xnnpack_delegate,
    )


def initial_configs(options: ServerOptions) -> list[ModelConfig]:
    """The model_config_list from --model_config_file, or one model from --model_base_path."""
    if options.model_config_file:
        config = config_protos.read_model_server_config(options.model_config_file)
        return list(config.model_config_list.config)
    return [
        ModelConfig(
            name=options.model_name, base_path=options.model_base_path, model_platform="tensorflow"
        )
    ]


class ModelServer:
    """Owns the manager, the data plane and both API servers."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        # refuse bad files and flag combinations before any model loads
        self.session_config = session_config(options)
        self.grpc_credentials = server_credentials(options)
        self.metrics = ServingMetrics()
        self.scheduler = (
            SharedBatchScheduler(batching_options(options)) if options.enable_batching else None
        )
        self.tags = [t.strip() for t in options.saved_model_tags.split(",") if t.strip()]
        self.tflite = tflite_options(options)
        self.manager = ModelManager(
            self._load,
            poll_wait_seconds=options.file_system_poll_wait_seconds,
            max_load_retries=options.max_num_load_retries,
            load_retry_interval_s=options.load_retry_interval_micros / 1e6,
            allow_labels_for_unavailable=options.allow_version_labels_for_unavailable_models,
            load_threads=options.num_load_threads,
            unload_threads=options.num_unload_threads,
            on_unloaded=self._forget_series,
        )
        self.metrics.model_known = self.manager.has_model
        self.plane = DataPlane(
            self.manager, self.metrics, self.scheduler, options.enable_signature_method_name_check
        )
        self.metrics_path = self._metrics_path()
        self._reload_lock = threading.Lock()
        self._stop = threading.Event()
        self._grpc = None
        self._health: Any = None
        self._rest: uvicorn.Server | None = None
        self._rest_api: RestApi | None = None

    def _metrics_path(self) -> str | None:
        if not self.options.monitoring_config_file:
            return None
        config = config_protos.read_monitoring_config(self.options.monitoring_config_file)
        if not config.prometheus_config.enable:
            return None
        return config.prometheus_config.path or DEFAULT_METRICS_PATH

    def _forget_series(self, name: str, paths: Sequence[Path], model_gone: bool) -> None:
        """Unloaded versions (and a model gone from the config) leave the metrics page."""
        self.metrics.forget(name, [str(path) for path in paths], model_gone)

    def _load(self, name: str, version: int, path: Path) -> Servable:
        start = time.perf_counter()
        per_model = self.options.enable_per_model_batching_parameters
        shared = self.scheduler.options if self.scheduler is not None and per_model else None
        try:  # a version's own batching file is read first: a bad one fails the load
            own = model_batching(path, shared) if shared is not None else None
            servable: Servable
            if self.tflite.serves(path):
                log.info("Reading TFLite model from %s", path / TFLITE_FILE)
                servable = TfLiteServable(name, version, path, self.tflite)
            else:
                servable = Servable(
                    name,
                    version,
                    path,
                    tags=self.tags,
                    config=self.session_config,
                    timeout_ms=self.options.rest_api_timeout_in_ms,
                )
        except Exception as exc:
            self.metrics.load_attempt_count.inc(str(path), "fail")
            if isinstance(exc, ServingError):
                raise
            message = getattr(exc, "message", None) or str(exc)
            raise ServingError(code_of(exc), message) from exc
        if shared is not None:  # per-model batching: batched only with a file of its own
            servable.batched, servable.batching = own is not None, own
        self.metrics.load_attempt_count.inc(str(path), "success")
        self.metrics.load_latency.inc(str(path), amount=int((time.perf_counter() - start) * 1e6))
        if self.options.enable_model_warmup:
            try:
                run_warmup(servable, self.plane, self.options.num_request_iterations_for_warmup)
            except BaseException:
                servable.close()
                raise
        return servable

    # ----- configuration ---------------------------------------------------------------
    def reload_config(self, config: config_protos.ModelServerConfig) -> None:
        """Apply a new model_config_list: blocks until new models are AVAILABLE or failed."""
        configs = list(config.model_config_list.config)
        with self._reload_lock:
            self._serve_models(configs)

    def _serve_models(self, configs: list[ModelConfig], start_polling: bool = False) -> None:
        """Serve configs' models; block until they are AVAILABLE (or failed), then label them."""
        self.manager.set_config(configs)
        if start_polling:
            self.manager.start_polling()
        errors = self.manager.wait_until_available([c.name for c in configs])
        if errors:
            raise ServingError(
                Code.UNKNOWN,
                f"{len(errors)} model(s) did not become available: {{{', '.join(errors)}}}",
            )
        self.manager.apply_labels(configs)

    def _poll_config_file(self) -> None:
        wait = self.options.model_config_file_poll_wait_seconds
        last = None
        while not self._stop.wait(wait):
            try:
                config = config_protos.read_model_server_config(self.options.model_config_file)
                if config == last:
                    continue
                last = config
                self.reload_config(config)
            except ServingError as exc:
                log.error(
                    "Failed to reload model config %s: %s",
                    self.options.model_config_file,
                    exc.message,
                )

    # ----- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Load every model (blocking), then open the gRPC and REST ports."""
        self._serve_models(initial_configs(self.options), start_polling=True)
        if self.options.model_config_file and self.options.model_config_file_poll_wait_seconds > 0:
            threading.Thread(
                target=self._poll_config_file, name="tfs-config-poller", daemon=True
            ).start()
        if self.options.port or self.options.grpc_socket_path:
            if self.options.enable_grpc_healthcheck_service:
                self._health = health_service()
            self._grpc = start_grpc_server(
                self.plane,
                self.reload_config,
                port=self.options.port,
                socket_path=self.options.grpc_socket_path,
                max_threads=self.options.grpc_max_threads,
                channel_arguments=grpc_channel_arguments(self.options.grpc_channel_arguments),
                host=self.options.bind_address,
                credentials=self.grpc_credentials,
                health=self._health,
                profiler=self.options.enable_profiler,
            )
            log.info(
                "Running gRPC ModelServer at %s:%d%s ...",
                self.options.bind_address,
                self.options.port,
                " (TLS)" if self.grpc_credentials else "",
            )

    def serve(self) -> None:
        """Serve until SIGTERM/SIGINT (REST runs the event loop when it is enabled)."""
        rest_port = self.options.rest_api_port
        if rest_port and rest_port == self.options.port:
            log.error(
                "--rest_api_port cannot be the same as --port. Please use a different port "
                "for HTTP/REST API. Skipped setting up HTTP/REST API."
            )
            rest_port = 0
        # uvicorn handles these signals while it serves, then raises them again to the handler
        # it found: this one, so stop() still runs (gRPC's grace, health NOT_SERVING, unloads)
        # instead of the default handler ending the process.
        if threading.current_thread() is threading.main_thread():  # else the caller stops it
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._stop.set())
        if not rest_port:
            self._stop.wait()
            return
        self._rest_api = RestApi(
            self.plane,
            num_threads=self.options.rest_api_num_threads,
            timeout_ms=self.options.rest_api_timeout_in_ms,
            metrics_path=self.metrics_path,
            enable_cors=self.options.rest_api_enable_cors_support,
        )
        config = uvicorn.Config(
            self._rest_api,
            host=self.options.bind_address,
            port=rest_port,
            http="httptools",
            loop="asyncio",
            lifespan="off",
            access_log=False,
            log_level="warning",
            timeout_keep_alive=75,
            backlog=2048,
        )
        self._rest = uvicorn.Server(config)
        log.info("Exporting HTTP/REST API at:%s:%d ...", self.options.bind_address, rest_port)
        asyncio.run(self._rest.serve())

    def stop(self) -> None:
        """Stop serving and unload every model."""
        self._stop.set()
        if self._rest is not None:
            self._rest.should_exit = True
        if self._health is not None:
            self._health.enter_graceful_shutdown()  # every service NOT_SERVING
        if self._grpc is not None:
            self._grpc.stop(grace=2).wait(5)
        if self._rest_api is not None:
            self._rest_api.close()
        if self.scheduler is not None:
            self.scheduler.close()
        self.manager.close()


def run(options: ServerOptions) -> None:
    """Run a server to completion; ServingError or OSError when it does not start."""
    server = ModelServer(options)
    try:
        server.start()
        server.serve()
    finally:
        server.stop()


def check_files(options: ServerOptions) -> None:
    """Fail early, with the file's name, on config files that cannot be read."""
    for name in (
        "model_config_file",
        "batching_parameters_file",
        "monitoring_config_file",
        "tensorflow_session_config_file",
        "ssl_config_file",
    ):
        path = getattr(options, name)
        if path and not os.path.isfile(path):
            raise not_found(f"{path}; No such file or directory")  # TF's Env error
