"""One loaded SavedModel version, run as TF Serving runs it: a Session over the MetaGraph.

TF Serving loads every SavedModel (TF1 or TF2 export) into a Session and runs signature
tensors by name. `tf.saved_model.load` cannot load some TF1 exports, and `Session.run`
rejects feeds that the C++ runtime accepts (shape [3] into a [None, 1] tensor), so calls
go through Session callables, which feed the C++ runtime directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2

from tfs_model_server import tf_runtime
from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.errors import (
    Code,
    ServingError,
    failed_precondition,
    internal,
    invalid_argument,
)
from tfs_model_server.tensor_spec import TensorSpec

log = logging.getLogger(__name__)

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
DEFAULT_SIGNATURE = "serving_default"

# TF's OpError.error_code numbers are absl codes; map them back to ours.
_CODES_BY_NUMBER = {code.number: code for code in Code}

Callable_ = Callable[..., list[np.ndarray]]
# Without a config (session_options.session_config builds the server's): TF picks the thread
# counts, and a model exported with GPU placements runs on CPU.
_DEFAULT_CONFIG = config_pb2.ConfigProto(allow_soft_placement=True)


@dataclass(frozen=True)
class Signature:
    """A SignatureDef with its inputs and outputs as TensorSpecs, in proto order."""

    key: str
    method_name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    proto: meta_graph_pb2.SignatureDef = field(repr=False, compare=False)


def _spec(alias: str, info: meta_graph_pb2.TensorInfo) -> TensorSpec:
    shape = None
    if not info.tensor_shape.unknown_rank:
        shape = tuple(d.size if d.size >= 0 else None for d in info.tensor_shape.dim)
    return TensorSpec(alias=alias, tensor_name=info.name, dtype=info.dtype, shape=shape)


def _signature(key: str, proto: meta_graph_pb2.SignatureDef) -> Signature:
    return Signature(
        key=key,
        method_name=proto.method_name,
        inputs={alias: _spec(alias, info) for alias, info in proto.inputs.items()},
        outputs={alias: _spec(alias, info) for alias, info in proto.outputs.items()},
        proto=proto,
    )


def _type_string(datatype: int) -> str:
    """TF's DataTypeString: DT_FLOAT is "float", DT_STRING "string"."""
    return types_pb2.DataType.Name(datatype)[len("DT_") :].lower()


def feed_type_error(index: int, expected: int, given: int) -> ServingError:
    """Session::Run's refusal of feed `index` of DataType `given` for one of `expected`."""
    return invalid_argument(
        f"Expects arg[{index}] to be {_type_string(expected)} but {_type_string(given)} is provided"
    )


def as_serving_error(exc: BaseException) -> ServingError:
    """Translate a TensorFlow runtime error into a ServingError with the same code."""
    if isinstance(exc, ServingError):
        return exc
    if isinstance(exc, tf_runtime.OpError):
        code = _CODES_BY_NUMBER.get(exc.error_code, Code.UNKNOWN)
        return ServingError(code, exc.message)
    if isinstance(exc, (TypeError, ValueError)):
        return invalid_argument(str(exc))
    return internal(f"{type(exc).__name__}: {exc}")


class Servable:
    """A SavedModel version loaded into its own Graph and Session."""

    def __init__(
        self,
        name: str,
        version: int,
        path: Path,
        *,
        tags: Sequence[str] = ("serve",),
        config: config_pb2.ConfigProto | None = None,
        timeout_ms: int = 0,
    ) -> None:
        self.name = name
        self.version = version
        self.path = Path(path)
        self.timeout_ms = timeout_ms
        self._graph = tf_runtime.Graph()
        self._session = tf_runtime.Session(graph=self._graph, config=config or _DEFAULT_CONFIG)
        try:
            with self._graph.as_default():
                self.meta_graph = tf_runtime.load_saved_model(
                    self._session, list(tags), str(self.path)
                )
        except BaseException:
            self._session.close()
            raise
        self.signatures = {
            key: _signature(key, proto) for key, proto in self.meta_graph.signature_def.items()
        }
        self._callables: dict[tuple[tuple[str, ...], tuple[str, ...], int], Callable_] = {}
        self._feed_types: dict[str, int | None] = {}
        self._lock = threading.Lock()
        # --enable_per_model_batching_parameters: its own BatchingOptions (None: the
        # server's), or not batched at all when its directory has no batching_params.pbtxt
        self.batching: BatchingOptions | None = None
        self.batched = True

    def signature(self, key: str) -> Signature:
        """The signature named key, or FAILED_PRECONDITION as TF Serving's Predict says it."""
        sig = self.signatures.get(key or DEFAULT_SIGNATURE)
        if sig is None:
            raise failed_precondition(f'Serving signature key "{key}" not found.')
        return sig

    def _callable(
        self, feeds: tuple[str, ...], fetches: tuple[str, ...], timeout_ms: int
    ) -> Callable_:
        key = (feeds, fetches, timeout_ms)
        found = self._callables.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._callables.get(key)
            if found is None:
                options = config_pb2.CallableOptions(feed=list(feeds), fetch=list(fetches))
                if timeout_ms > 0:
                    options.run_options.timeout_in_ms = timeout_ms
                found = self._session._make_callable_from_options(options)
                self._callables[key] = found
            return found

    def _feed_type(self, name: str) -> int | None:
        """The DataType a graph tensor takes (None: no such tensor, the runtime will say)."""
        if name not in self._feed_types:
            try:
                dtype = self._graph.get_tensor_by_name(name).dtype.base_dtype
                self._feed_types[name] = dtype.as_datatype_enum
            except (KeyError, ValueError):
                self._feed_types[name] = None
        return self._feed_types[name]

    def _check_feed_types(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Session::Run's check of each feed's type, with its text (Session callables only
        fail inside the graph, with another)."""
        for i, (name, value) in enumerate(feeds.items()):
            expected = self._feed_type(name)
            try:
                given = tf_runtime.as_dtype(np.asarray(value).dtype).as_datatype_enum
            except TypeError:
                continue
            if expected is not None and given != expected:
                raise feed_type_error(i, expected, given)

    def run_tensors(
        self,
        feeds: Mapping[str, np.ndarray],
        fetches: Sequence[str],
        timeout_ms: int | None = None,
    ) -> list[np.ndarray]:
        """Run graph tensors by name; feeds are checked only for their types, as Session::Run
        checks them, and passed to the C++ runtime as they are."""
        self._check_feed_types(feeds)
        names = tuple(feeds)
        call = self._callable(
            names, tuple(fetches), self.timeout_ms if timeout_ms is None else timeout_ms
        )
        try:
            return call(*(feeds[n] for n in names))
        except Exception as exc:
            raise as_serving_error(exc) from exc

    def run(
        self,
        signature: Signature,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str],
        timeout_ms: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Run a signature: inputs and outputs keyed by alias."""
        feeds = {signature.inputs[alias].tensor_name: value for alias, value in inputs.items()}
        fetches = [signature.outputs[alias].tensor_name for alias in output_aliases]
        values = self.run_tensors(feeds, fetches, timeout_ms)
        return dict(zip(output_aliases, values, strict=True))

    def close(self) -> None:
        """Release the Session and everything it holds."""
        self._callables.clear()
        self._session.close()


def predict_plan(
    model_name: str,
    signature: Signature,
    input_aliases: Sequence[str],
    output_filter: Sequence[str],
) -> list[str]:
    """Check a predict request against its signature (TF Serving's texts); return output aliases."""
    wanted, have = set(signature.inputs), set(input_aliases)
    defaults = signature.proto.defaults
    if len(have) > len(wanted) or (len(have) < len(wanted) and not defaults):
        extra, missing = sorted(have - wanted), sorted(wanted - have)
        raise invalid_argument(
            f"input size does not match signature: {len(have)}!={len(wanted)} "
            f"len({{{','.join(sorted(have))}}}) != len({{{','.join(sorted(wanted))}}}). "
            f"Sent extra: {{{','.join(extra)}}}. Missing but required: {{{','.join(missing)}}}."
        )
    missing = sorted(wanted - have - set(defaults))
    extra = sorted(have - wanted)
    if missing or extra:
        raise invalid_argument(
            f"Request inputs do not match required inputs for model `{model_name}`. "
            f"Send extra: {{{','.join(extra)}}}. Missing but required: {{{','.join(missing)}}}."
        )
    if not output_filter:
        return list(signature.outputs)
    seen: set[str] = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be in "
                f"the set {{{','.join(sorted(signature.outputs))}}}."
            )
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter)


def default_inputs(signature: Signature, given: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs completed with the signature's default values for those not given."""
    if not signature.proto.defaults:
        return dict(given)
    merged = dict(given)
    for alias, proto in signature.proto.defaults.items():
        if alias not in merged:
            merged[alias] = tf_runtime.make_ndarray(proto)
    return merged


__all__ = [
    "CLASSIFY_METHOD",
    "DEFAULT_SIGNATURE",
    "PREDICT_METHOD",
    "REGRESS_METHOD",
    "Servable",
    "ServingError",
    "Signature",
    "as_serving_error",
    "default_inputs",
    "predict_plan",
]
