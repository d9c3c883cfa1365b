"""A version served from its TFLite model (`model.tflite`), as TF Serving serves it with
--prefer_tflite_model (saved_model_bundle_factory.cc, tflite_session.cc,
tflite_interpreter_pool.cc).

- The model is `<version>/model.tflite`. With --prefer_tflite_model a version without one is
  loaded as a SavedModel; with --use_tflite_model (TF Serving's older flag: "instead of the
  TensorFlow model") its load fails with NOT_FOUND.
- An interpreter is not thread-safe: each version holds a pool of --num_tflite_pools
  interpreters (TF Serving's default: one per CPU; at least one), and a request runs on one
  it has to itself, waiting for one when all are busy.
- Each interpreter runs on --tflite_num_threads threads (TF Serving always uses 1, our
  default) and applies TFLite's default XNNPACK delegate only with
  --enable_tflite_xnnpack_delegate (neither flag is in TF Serving's public source).
- A feed's shape is applied as TF Serving applies it, by resizing the input (not strictly);
  a shape the model cannot run is an INVALID_ARGUMENT here (TF Serving: INTERNAL, "Failed to
  allocate tensors"). A feed of another type than the input's is refused with Session::Run's
  text (TF Serving's TfLiteSession copies its bytes unchecked).
- Not done: --num_tflite_interpreters_per_pool > 1, TF Serving's batch scheduler inside the
  session (same answers; --enable_batching batches a TFLite version as any other), and the
  REST deadline inside a run (an interpreter cannot be stopped).
"""

from __future__ import annotations

import contextlib
import queue
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tensorflow.core.protobuf import meta_graph_pb2

from tfs_model_server.core.servable import Servable, Signature, _signature, feed_type_error
from tfs_model_server.core.tflite_signatures import Binding, datatype, model_signatures
from tfs_model_server.errors import invalid_argument, not_found, unimplemented

TFLITE_FILE = "model.tflite"


@dataclass(frozen=True)
class TfLiteOptions:
    """The TFLite flags: whether a version is served from model.tflite, and how it runs."""

    prefer: bool = False  # --prefer_tflite_model
    require: bool = False  # --use_tflite_model
    pools: int = 1  # --num_tflite_pools: interpreters per version
    num_threads: int = 1  # --tflite_num_threads
    xnnpack: bool = False  # --enable_tflite_xnnpack_delegate

    def serves(self, version_path: Path) -> bool:
        """Whether the version at version_path is loaded from its TFLite model."""
        return self.require or (self.prefer and (version_path / TFLITE_FILE).exists())


def _interpreter(model: bytes, options: TfLiteOptions) -> Any:
    from tensorflow.lite.python.interpreter import Interpreter, OpResolverType

    resolver = (
        OpResolverType.AUTO if options.xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated ... use LiteRT"
        warnings.simplefilter("ignore")
        return Interpreter(
            model_content=model,
            num_threads=options.num_threads,
            experimental_op_resolver_type=resolver,
        )


class _Worker:
    """One interpreter and its signature runners: used by one thread at a time."""

    def __init__(self, model: bytes, options: TfLiteOptions) -> None:
        self.interpreter = _interpreter(model, options)
        self._runners: dict[str, Any] = {}

    def run(
        self, binding: Binding, inputs: Mapping[str, np.ndarray], aliases: Sequence[str]
    ) -> dict[str, np.ndarray]:
        if binding.runner is not None:
            runner = self._runners.get(binding.runner)
            if runner is None:
                runner = self._runners[binding.runner] = self.interpreter.get_signature_runner(
                    binding.runner
                )
            outputs = runner(**inputs)
            return {alias: outputs[alias] for alias in aliases}
        return self._run_tensors(binding, inputs, aliases)

    def _run_tensors(
        self, binding: Binding, inputs: Mapping[str, np.ndarray], aliases: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """SetInputAndInvokeMiniBatch: resize the inputs whose shape changed (not strictly),
        allocate (a no-op when nothing changed), copy in, invoke; the outputs are copies."""
        interpreter = self.interpreter
        shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}
        for alias, value in inputs.items():
            index = binding.inputs[alias]
            if shapes[index] != value.shape:
                interpreter.resize_tensor_input(index, list(value.shape), strict=False)
        interpreter.allocate_tensors()
        for alias, value in inputs.items():
            interpreter.set_tensor(binding.inputs[alias], value)
        interpreter.invoke()
        return {alias: interpreter.get_tensor(binding.outputs[alias]) for alias in aliases}


class TfLiteServable(Servable):
    """A Servable whose signatures run on a pool of TFLite interpreters instead of a Session
    (the attributes and methods the data plane uses are Servable's)."""

    def __init__(self, name: str, version: int, path: Path, options: TfLiteOptions) -> None:
        self.name = name
        self.version = version
        self.path = Path(path)
        self.timeout_ms = 0
        model_path = self.path / TFLITE_FILE
        try:
            model = model_path.read_bytes()
        except FileNotFoundError:
            raise not_found(f"{model_path}; No such file or directory") from None
        try:
            first = _Worker(model, options)
        except ValueError as exc:
            raise invalid_argument(f"Cannot build FlatBufferModel from buffer: {exc}") from exc
        found = model_signatures(model, first.interpreter)
        self.meta_graph = meta_graph_pb2.MetaGraphDef()
        for key, (proto, _) in found.items():
            self.meta_graph.signature_def[key].CopyFrom(proto)
        self.signatures = {key: _signature(key, proto) for key, (proto, _) in found.items()}
        self._bindings = {key: binding for key, (_, binding) in found.items()}
        self._pool: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._pool.put(first)
        for _ in range(max(1, options.pools) - 1):
            self._pool.put(_Worker(model, options))
        self.batching = None
        self.batched = True

    @contextlib.contextmanager
    def _worker(self) -> Iterator[_Worker]:
        """An interpreter of the pool for this thread alone (waits while all are busy)."""
        worker = self._pool.get()
        try:
            yield worker
        finally:
            self._pool.put(worker)

    def _check_types(self, signature: Signature, inputs: Mapping[str, np.ndarray]) -> None:
        """Session::Run's check of each feed's type (and TfLiteSession::Run's of its name; the
        data plane has refused unknown inputs before, with TF Serving's text)."""
        for i, (alias, value) in enumerate(inputs.items()):
            spec = signature.inputs.get(alias)
            if spec is None:
                raise invalid_argument(f"Missing input TFLite tensor: {alias}")
            expected = spec.dtype
            given = datatype(np.asarray(value).dtype)
            if given != expected:
                raise feed_type_error(i, expected, given)

    def run(
        self,
        signature: Signature,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str],
        timeout_ms: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Run a signature on an interpreter of the pool: inputs and outputs keyed by alias.
        A shape or value the model cannot run is an INVALID_ARGUMENT."""
        self._check_types(signature, inputs)
        binding = self._bindings[signature.key]
        feeds = {alias: np.asarray(value) for alias, value in inputs.items()}
        with self._worker() as worker:
            try:
                return worker.run(binding, feeds, output_aliases)
            except (ValueError, RuntimeError) as exc:
                raise invalid_argument(f"TfLite: {' '.join(str(exc).split())}") from exc

    def run_tensors(
        self,
        feeds: Mapping[str, np.ndarray],
        fetches: Sequence[str],
        timeout_ms: int | None = None,
    ) -> list[np.ndarray]:
        """Graph tensors by name exist only in a SavedModel's Session."""
        raise unimplemented("Running tensors by name needs a SavedModel; this is a TFLite model")

    def close(self) -> None:
        """Drop the interpreters (each is freed once no request holds it)."""
        while True:
            try:
                self._pool.get_nowait()
            except queue.Empty:
                return


__all__ = ["TFLITE_FILE", "TfLiteOptions", "TfLiteServable"]
