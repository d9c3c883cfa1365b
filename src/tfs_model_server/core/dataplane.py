"""The one data-plane object both the REST and the gRPC layers call.

It resolves a model spec to a loaded version, checks the request against the signature with
TF Serving's rules and texts, runs it (through the batching queues when batching is on) and
records TF Serving's metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

from tfs_model_server.api.metrics import ServingMetrics
from tfs_model_server.batching.scheduler import SharedBatchScheduler
from tfs_model_server.core import servable as sv
from tfs_model_server.core.errors import Code, ServingError, deadline_exceeded, invalid_argument
from tfs_model_server.core.manager import ModelManager, State
from tfs_model_server.core.servable import Servable, Signature

InputsFn = Callable[[Signature], Mapping[str, np.ndarray]]
Classes = list[list[tuple[bytes, float]]]


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


class DataPlane:
    """Predict, classify, regress, multi-inference, metadata and status over a ModelManager."""

    def __init__(
        self,
        manager: ModelManager,
        metrics: ServingMetrics,
        scheduler: SharedBatchScheduler | None = None,
        method_name_check: bool = False,
    ) -> None:
        self.manager = manager
        self.metrics = metrics
        self.scheduler = scheduler
        self.method_name_check = method_name_check

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
            return self.scheduler.queue(key, run_batch).run(dict(inputs), deadline)
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
        ref.check()
        with self.manager.servable(ref.name, ref.version, ref.label) as servable:
            return self.predict_on(servable, ref.signature_name, inputs, output_filter, deadline)

    # ----- Classify / Regress --------------------------------------------------------------
    def _inference_signature(
        self, servable: Servable, signature_name: str, method: str
    ) -> Signature:
        name = signature_name or sv.DEFAULT_SIGNATURE
        signature = servable.signatures.get(name)
        if signature is None:
            raise invalid_argument(f"No signature was found with the name: {name}")
        kind = "classification" if method == sv.CLASSIFY_METHOD else "regression"
        if self.method_name_check and signature.method_name != method:
            raise invalid_argument(
                f"Expected {kind} signature method_name to be {method}. "
                f"Was: {signature.method_name}"
            )
        if len(signature.inputs) != 1:
            raise invalid_argument("Expected one input Tensor.")
        if "inputs" not in signature.inputs:
            raise invalid_argument(f"No {kind} inputs found in SignatureDef: {signature.proto}")
        if method == sv.CLASSIFY_METHOD:
            if len(signature.outputs) not in (1, 2):
                raise invalid_argument(
                    f"Expected one or two output Tensors, found {len(signature.outputs)}"
                )
            if "classes" not in signature.outputs and "scores" not in signature.outputs:
                raise invalid_argument(
                    "Expected classification signature outputs to contain at least one of "
                    f'"classes" or "scores". Signature was: {signature.proto}'
                )
        else:
            if len(signature.outputs) != 1:
                raise invalid_argument("Expected one output Tensor.")
            if "outputs" not in signature.outputs:
                raise invalid_argument(
                    f"No regression outputs found in SignatureDef: {signature.proto}"
                )
        return signature

    def _examples_tensor(
        self, servable: Servable, examples: Sequence[bytes], context: bytes | None
    ) -> np.ndarray:
        if not examples:
            raise invalid_argument("Input is empty.")
        if context:
            examples = [context + example for example in examples]
        tensor = np.empty(len(examples), dtype=object)
        tensor[:] = list(examples)
        self.metrics.example_counts.observe(len(examples), servable.name)
        self.metrics.example_count_total.inc(servable.name, amount=len(examples))
        return tensor

    def classify_on(
        self,
        servable: Servable,
        signature_name: str,
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> InferenceResult:
        signature = self._inference_signature(servable, signature_name, sv.CLASSIFY_METHOD)
        tensor = self._examples_tensor(servable, examples, context)
        aliases = [a for a in ("classes", "scores") if a in signature.outputs]
        out = self.run(servable, signature, {"inputs": tensor}, aliases, deadline, "Classify")
        n = len(tensor)
        classes, scores = out.get("classes"), out.get("scores")
        for what, value, dtype in (
            ("classes", classes, "DT_STRING"),
            ("scores", scores, "DT_FLOAT"),
        ):
            if value is None:
                continue
            if value.ndim != 2:
                raise invalid_argument(
                    "Expected Tensor shape: [batch_size num_classes] but got "
                    f"[{','.join(map(str, value.shape))}]"
                )
            ok = value.dtype == object if what == "classes" else value.dtype == np.float32
            if not ok:
                raise invalid_argument(
                    f"Expected {what} Tensor of {dtype}. Got: DT_{str(value.dtype).upper()}"
                )
            if value.shape[0] != n:
                raise invalid_argument(
                    f"Expected {what} output batch size of {n}. Got: {value.shape[0]}"
                )
        if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
            raise invalid_argument(
                "Tensors class and score should match in dim_size(1). Got "
                f"{classes.shape[1]} vs. {scores.shape[1]}"
            )
        first = classes if classes is not None else scores
        assert first is not None  # the signature has classes, scores or both
        width = first.shape[1]
        results = [
            [
                (
                    bytes(classes[i, c]) if classes is not None else b"",
                    float(scores[i, c]) if scores is not None else 0.0,
                )
                for c in range(width)
            ]
            for i in range(n)
        ]
        return InferenceResult(
            servable.name, servable.version, signature.key, classifications=results
        )

    def regress_on(
        self,
        servable: Servable,
        signature_name: str,
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> InferenceResult:
        signature = self._inference_signature(servable, signature_name, sv.REGRESS_METHOD)
        tensor = self._examples_tensor(servable, examples, context)
        out = self.run(servable, signature, {"inputs": tensor}, ["outputs"], deadline, "Regress")
        value = out["outputs"]
        if not (value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1)):
            raise invalid_argument(
                "Expected output Tensor shape to be either [batch_size] or "
                f"[batch_size, 1] but got [{','.join(map(str, value.shape))}]"
            )
        if value.dtype != np.float32:
            raise invalid_argument(
                f"Expected output Tensor of DT_FLOAT. Got: DT_{str(value.dtype).upper()}"
            )
        if value.shape[0] != len(tensor):
            raise invalid_argument(
                "Input batch size did not match output batch size: "
                f"{len(tensor)} vs. {value.shape[0]}"
            )
        return InferenceResult(
            servable.name,
            servable.version,
            signature.key,
            regressions=[float(v) for v in value.reshape(-1)],
        )

    def classify(
        self,
        ref: ModelRef,
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> InferenceResult:
        ref.check()
        with self.manager.servable(ref.name, ref.version, ref.label) as servable:
            return self.classify_on(servable, ref.signature_name, examples, context, deadline)

    def regress(
        self,
        ref: ModelRef,
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> InferenceResult:
        ref.check()
        with self.manager.servable(ref.name, ref.version, ref.label) as servable:
            return self.regress_on(servable, ref.signature_name, examples, context, deadline)

    def multi_inference(
        self,
        tasks: Sequence[tuple[ModelRef, str]],
        examples: Sequence[bytes],
        context: bytes | None = None,
        deadline: float | None = None,
    ) -> list[InferenceResult]:
        """Several classify/regress tasks of one model version over the same examples."""
        if not tasks:
            raise invalid_argument("Inference request should contain at least one task.")
        first = tasks[0][0]
        seen: set[str] = set()
        for ref, method in tasks:
            if ref.name != first.name:
                raise invalid_argument(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name."
                )
            if ref.version != first.version or ref.label != first.label:
                raise invalid_argument(
                    "ModelSpecs in a MultiInferenceRequest must access the same model version."
                )
            if ref.signature_name in seen:
                raise invalid_argument(
                    "Duplicate evaluation of signature: "
                    f"{ref.signature_name or sv.DEFAULT_SIGNATURE}"
                )
            seen.add(ref.signature_name)
            if method not in (sv.CLASSIFY_METHOD, sv.REGRESS_METHOD):
                raise invalid_argument(f"Unsupported signature method_name: {method}")
        first.check()
        with self.manager.servable(first.name, first.version, first.label) as servable:
            results = []
            for ref, method in tasks:
                run = self.classify_on if method == sv.CLASSIFY_METHOD else self.regress_on
                results.append(run(servable, ref.signature_name, examples, context, deadline))
            return results

    # ----- Metadata / status -----------------------------------------------------------
    def metadata(
        self, ref: ModelRef, fields: Sequence[str] = ("signature_def",)
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        ref.check()
        if not fields:
            raise invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field"
            )
        for field in fields:
            if field != "signature_def":
                raise invalid_argument(f"Metadata field {field} is not supported")
        with self.manager.servable(ref.name, ref.version, ref.label) as servable:
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.CopyFrom(model_spec(servable.name, servable.version, ""))
            sig_map = get_model_metadata_pb2.SignatureDefMap()
            for key, proto in servable.meta_graph.signature_def.items():
                sig_map.signature_def[key].CopyFrom(proto)
            response.metadata["signature_def"].Pack(sig_map)
            return response

    def status(self, ref: ModelRef) -> get_model_status_pb2.GetModelStatusResponse:
        if not ref.name:
            raise invalid_argument("Missing ModelSpec")
        ref.check()
        response = get_model_status_pb2.GetModelStatusResponse()
        for version, state, error in self.manager.version_states(ref.name, ref.version, ref.label):
            entry = response.model_version_status.add(version=version, state=int(state))
            if error is not None:
                entry.status.error_code = error.code.number
                entry.status.error_message = error.message
        return response


def signature_def_map(servable: Servable) -> dict[str, meta_graph_pb2.SignatureDef]:
    return dict(servable.meta_graph.signature_def.items())


__all__ = ["DataPlane", "InferenceResult", "ModelRef", "PredictResult", "State", "model_spec"]
