"""The one data-plane object both the REST and the gRPC layers call.

It resolves a model spec to a loaded version, checks the request against the signature with
TF Serving's rules and texts, runs it (through the batching queues when batching is on) and
records TF Serving's metrics.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

from tfs_model_server.batching.scheduler import SharedBatchScheduler
from tfs_model_server.core import servable as sv
from tfs_model_server.core.inference import (
    Classes,
    classifications,
    examples_tensor,
    inference_signature,
    regressions,
)
from tfs_model_server.core.manager import ModelManager, State
from tfs_model_server.core.servable import Servable, Signature
from tfs_model_server.errors import (
    Code,
    ServingError,
    deadline_exceeded,
    invalid_argument,
    unimplemented,
)
from tfs_model_server.metrics import ServingMetrics

InputsFn = Callable[[Signature], Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class ModelRef:
    """Which model version a request addresses (name plus version or label, or neither)."""

    name: str
    version: int | None = None
    label: str | None = None
    signature_name: str = ""

    @classmethod
    def from_spec(cls, spec: model_pb2.ModelSpec) -> ModelRef:
        which = spec.WhichOneof("version_choice")
        return cls(
            name=spec.name,
            version=spec.version.value if which == "version" else None,
            label=spec.version_label if which == "version_label" else None,
            signature_name=spec.signature_name,
        )

    def check(self) -> None:
        if self.version is not None and self.label:
            raise invalid_argument("Both version and version_label are set in the ModelSpec")


@dataclass
class PredictResult:
    model_name: str
    version: int
    signature_name: str
    outputs: dict[str, np.ndarray]


@dataclass
class InferenceResult:
    model_name: str
    version: int
    signature_name: str
    classifications: Classes | None = None
    regressions: list[float] | None = None


def model_spec(name: str, version: int, signature_name: str) -> model_pb2.ModelSpec:
    spec = model_pb2.ModelSpec(name=name, signature_name=signature_name)
    spec.version.value = version
    return spec


BATCH_THREAD_POOL = "model_server_batch_threads"


ExampleSource = Callable[[], tuple[Sequence[bytes], bytes | None]]
"""A request's serialized tf.Examples and context, read when the model and signature pass."""


def _check_task(
    servable: Servable, model_name: str, ref: ModelRef, method: str, seen: set[str]
) -> None:
    """TensorFlowMultiInferenceRunner::Infer's checks of one task (multi_inference.cc);
    `model_name` is the first task's."""
    if not ref.name:
        raise invalid_argument("Found ModelSpec with an empty model name.")
    if ref.name != model_name:
        raise invalid_argument(
            "All ModelSpecs in a MultiInferenceRequest must access the same model name."
        )
    signature_name = ref.signature_name or sv.DEFAULT_SIGNATURE
    if signature_name in seen:
        raise invalid_argument(f"Duplicate evaluation of signature: {signature_name}")
    seen.add(signature_name)
    if signature_name not in servable.signatures:
        raise invalid_argument(f"Requested signature not found in model graph: {signature_name}")
    if method not in (sv.CLASSIFY_METHOD, sv.REGRESS_METHOD):
        raise unimplemented(f"Unsupported signature method_name: {method}")


@dataclass
class DataPlane:
    """Predict, classify, regress, multi-inference, metadata and status over a ModelManager."""

    manager: ModelManager
    metrics: ServingMetrics
    scheduler: SharedBatchScheduler | None = None
    method_name_check: bool = False

    @contextlib.contextmanager
    def held(self, ref: ModelRef) -> Iterator[Servable]:
        """The version ref names, held loaded for one request (ServerCore's
        GetServableHandle: a nameless ModelSpec is refused before any lookup)."""
        if not ref.name:
            raise invalid_argument("ModelSpec has no name specified.")
        ref.check()
        with self.manager.servable(ref.name, ref.version, ref.label) as servable:
            yield servable

    # ----- running a signature (optionally batched) --------------------------------------
    def run(
        self,
        servable: Servable,
        signature: Signature,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str],
        deadline: float | None = None,
        api: str = "Predict",
    ) -> dict[str, np.ndarray]:
        """Run one signature; batched only when it feeds and fetches the whole signature."""
        start = time.perf_counter()
        batchable = (
            self.scheduler is not None
            and servable.batched
            and len(inputs) == len(signature.inputs)
            and len(output_aliases) == len(signature.outputs)
        )
        try:
            if deadline is not None and time.monotonic() >= deadline:
                raise deadline_exceeded("Deadline exceeded before the model was run")
            if not batchable:
                # The Session's own timeout (--rest_api_timeout_in_ms) bounds the run; one
                # callable per (feeds, fetches) keeps calls cheap, so no per-request timeout.
                return servable.run(signature, inputs, output_aliases)
            key = (id(servable), signature.key, tuple(sorted(inputs)), tuple(output_aliases))

            def run_batch(merged: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
                size = next(iter(merged.values())).shape[0] if merged else 0
                self.metrics.batch_size.observe(size, BATCH_THREAD_POOL)
                return servable.run(signature, merged, output_aliases)

            assert self.scheduler is not None
            queue = self.scheduler.queue(key, run_batch, servable.batching)
            return queue.run(dict(inputs), deadline)
        finally:
            self.metrics.runtime_latency.observe(
                (time.perf_counter() - start) * 1e6, servable.name, api, "TF1"
            )

    # ----- Predict ----------------------------------------------------------------------
    def predict_on(
        self,
        servable: Servable,
        signature_name: str,
        inputs: Mapping[str, np.ndarray] | InputsFn,
        output_filter: Sequence[str] = (),
        deadline: float | None = None,
    ) -> PredictResult:
        """Predict against one loaded version (also used by warmup)."""
        signature = servable.signature(signature_name or sv.DEFAULT_SIGNATURE)
        if self.method_name_check and signature.method_name not in (
            sv.PREDICT_METHOD,
            sv.CLASSIFY_METHOD,
            sv.REGRESS_METHOD,
        ):
            raise ServingError(
                Code.INTERNAL,
                (
                    "Expected prediction signature method_name to be one of {"
                    f"{sv.PREDICT_METHOD}, {sv.CLASSIFY_METHOD}, {sv.REGRESS_METHOD}}}. "
                    f"Was: {signature.method_name}"
                ),
            )
        given = inputs(signature) if callable(inputs) else inputs
        aliases = sv.predict_plan(servable.name, signature, list(given), output_filter)
        full = sv.default_inputs(signature, given)
        outputs = self.run(servable, signature, full, aliases, deadline)
        return PredictResult(servable.name, servable.version, signature.key, outputs)

    def predict(
        self,
        ref: ModelRef,
        inputs: Mapping[str, np.ndarray] | InputsFn,
        output_filter: Sequence[str] = (),
        deadline: float | None = None,
    ) -> PredictResult:
        with self.held(ref) as servable:
            return self.predict_on(servable, ref.signature_name, inputs, output_filter, deadline)

    # ----- Classify / Regress --------------------------------------------------------------
    def infer_on(
        self,
        servable: Servable,
        method: str,
        signature_name: str,
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> InferenceResult:
        """Classify (CLASSIFY_METHOD) or regress (any other method) on one loaded version."""
        classify = method == sv.CLASSIFY_METHOD
        method = sv.CLASSIFY_METHOD if classify else sv.REGRESS_METHOD
        signature = inference_signature(servable, signature_name, method, self.method_name_check)
        tensor = examples_tensor(examples, context)
        self.metrics.example_counts.observe(len(tensor), servable.name)
        self.metrics.example_count_total.inc(servable.name, amount=len(tensor))
        result = InferenceResult(servable.name, servable.version, signature.key)
        if classify:
            aliases = [a for a in ("classes", "scores") if a in signature.outputs]
            out = self.run(servable, signature, {"inputs": tensor}, aliases, deadline, "Classify")
            result.classifications = classifications(out, len(tensor))
        else:
            out = self.run(
                servable, signature, {"inputs": tensor}, ["outputs"], deadline, "Regress"
            )
            result.regressions = regressions(out["outputs"], len(tensor))
        return result

    def infer(
        self, ref: ModelRef, method: str, examples: ExampleSource, deadline: float | None
    ) -> InferenceResult:
        """Classify or regress (by method) on the version ref names. As in TF Serving, the
        model and its signature are checked before the request's input is read."""
        with self.held(ref) as servable:
            inference_signature(servable, ref.signature_name, method, self.method_name_check)
            serialized, context = examples()
            return self.infer_on(
                servable, method, ref.signature_name, serialized, context, deadline
            )

    def multi_inference(
        self,
        tasks: Sequence[tuple[ModelRef, str]],
        examples: ExampleSource,
        deadline: float | None = None,
    ) -> list[InferenceResult]:
        """Several classify/regress tasks over the same examples, on the version the first
        task's ModelSpec names (TF Serving's RunMultiInferenceWithServerCore: the other tasks'
        versions play no part); every task is checked, in TF Serving's order, before the
        input is read and any task runs."""
        if not tasks:
            raise invalid_argument("ModelSpec has no name specified.")
        with self.held(tasks[0][0]) as servable:
            return self.multi_inference_on(servable, tasks, examples, deadline)

    def multi_inference_on(
        self,
        servable: Servable,
        tasks: Sequence[tuple[ModelRef, str]],
        examples: ExampleSource,
        deadline: float | None = None,
    ) -> list[InferenceResult]:
        """RunMultiInference on one loaded version (requests and warmup records)."""
        seen: set[str] = set()
        for ref, method in tasks:
            _check_task(servable, tasks[0][0].name, ref, method, seen)
            inference_signature(servable, ref.signature_name, method, self.method_name_check)
        serialized, context = examples()
        return [
            self.infer_on(servable, method, ref.signature_name, serialized, context, deadline)
            for ref, method in tasks
        ]

    # ----- Metadata / status -----------------------------------------------------------
    def metadata(
        self, ref: ModelRef, fields: Sequence[str] = ("signature_def",)
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        ref.check()  # before the field checks, as TF Serving orders them
        if not fields:
            raise invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field"
            )
        for field in fields:
            if field != "signature_def":
                raise invalid_argument(f"Metadata field {field} is not supported")
        with self.held(ref) as servable:
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.CopyFrom(model_spec(servable.name, servable.version, ""))
            sig_map = get_model_metadata_pb2.SignatureDefMap()
            for key, proto in servable.meta_graph.signature_def.items():
                sig_map.signature_def[key].CopyFrom(proto)
            response.metadata["signature_def"].Pack(sig_map)
            return response

    def status(self, ref: ModelRef) -> get_model_status_pb2.GetModelStatusResponse:
        """GetModelStatusImpl: a nameless model is not found like any other."""
        ref.check()
        response = get_model_status_pb2.GetModelStatusResponse()
        for version, state, error in self.manager.version_states(ref.name, ref.version):
            entry = response.model_version_status.add(version=version, state=int(state))
            if error is not None:
                entry.status.error_code = error.code.number
                entry.status.error_message = error.message
        return response


__all__ = ["DataPlane", "InferenceResult", "ModelRef", "PredictResult", "State", "model_spec"]
