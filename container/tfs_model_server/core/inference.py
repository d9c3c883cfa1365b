"""TF Serving's classify and regress rules: which signatures qualify, how serialized examples
are fed, and how the outputs become results (classifier.cc, regressor.cc), with its texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from tensorflow.core.framework import types_pb2

from tfs_model_server import tf_runtime
from tfs_model_server.core import servable as sv
from tfs_model_server.core.servable import Servable, Signature
from tfs_model_server.errors import invalid_argument

Classes = list[list[tuple[bytes, float]]]


def _shape_text(value: np.ndarray) -> str:
    return f"[{','.join(map(str, value.shape))}]"


def _dtype_text(value: np.ndarray) -> str:
    """TF's DataType_Name of an output's type: DT_FLOAT, DT_DOUBLE, DT_STRING (the runtime
    answers strings as an object array) ..."""
    if value.dtype == object:
        return "DT_STRING"
    return types_pb2.DataType.Name(tf_runtime.as_dtype(value.dtype).as_datatype_enum)


def inference_signature(
    servable: Servable, signature_name: str, method: str, method_name_check: bool
) -> Signature:
    """The classify (CLASSIFY_METHOD) or regress signature a request names, checked in TF
    Serving's order (PreProcessClassification, PreProcessRegression)."""
    name = signature_name or sv.DEFAULT_SIGNATURE
    signature = servable.signatures.get(name)
    if signature is None:
        raise invalid_argument(f"No signature was found with the name: {name}")
    kind = "classification" if method == sv.CLASSIFY_METHOD else "regression"
    if method_name_check and signature.method_name != method:
        raise invalid_argument(
            f"Expected {kind} signature method_name to be {method}. Was: {signature.method_name}"
        )
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    classify = method == sv.CLASSIFY_METHOD
    if classify and len(signature.outputs) not in (1, 2):
        raise invalid_argument(
            f"Expected one or two output Tensors, found {len(signature.outputs)}"
        )
    if not classify and len(signature.outputs) != 1:
        raise invalid_argument("Expected one output Tensor.")
    if "inputs" not in signature.inputs:
        raise invalid_argument(f"No {kind} inputs found in SignatureDef: {signature.proto}")
    if classify and "classes" not in signature.outputs and "scores" not in signature.outputs:
        raise invalid_argument(
            "Expected classification signature outputs to contain at least one of "
            f'"classes" or "scores". Signature was: {signature.proto}'
        )
    if not classify and "outputs" not in signature.outputs:
        raise invalid_argument(f"No regression outputs found in SignatureDef: {signature.proto}")
    return signature


def examples_tensor(examples: Sequence[bytes], context: bytes | None) -> np.ndarray:
    """The signature's string input: each serialized Example, after the context if any."""
    if not examples:
        raise invalid_argument("Input is empty.")
    if context:
        examples = [context + example for example in examples]
    tensor = np.empty(len(examples), dtype=object)
    tensor[:] = list(examples)
    return tensor


def _check_classify_output(what: str, value: np.ndarray, n: int) -> None:
    if value.ndim != 2:
        raise invalid_argument(
            f"Expected Tensor shape: [batch_size num_classes] but got {_shape_text(value)}"
        )
    dtype, ok = (
        ("DT_STRING", value.dtype == object)
        if what == "classes"
        else ("DT_FLOAT", value.dtype == np.float32)
    )
    if not ok:
        raise invalid_argument(f"Expected {what} Tensor of {dtype}. Got: {_dtype_text(value)}")
    if value.shape[0] != n:
        raise invalid_argument(f"Expected {what} output batch size of {n}. Got: {value.shape[0]}")


def classifications(outputs: Mapping[str, np.ndarray], n: int) -> Classes:
    """A classify signature's outputs for n examples: per example, its (label, score) pairs."""
    classes, scores = outputs.get("classes"), outputs.get("scores")
    for what, value in (("classes", classes), ("scores", scores)):
        if value is not None:
            _check_classify_output(what, value, n)
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise invalid_argument(
            "Tensors class and score should match in dim_size(1). Got "
            f"{classes.shape[1]} vs. {scores.shape[1]}"
        )
    first = classes if classes is not None else scores
    assert first is not None  # the signature has classes, scores or both
    return [
        [
            (
                bytes(classes[i, c]) if classes is not None else b"",
                float(scores[i, c]) if scores is not None else 0.0,
            )
            for c in range(first.shape[1])
        ]
        for i in range(n)
    ]


def regressions(value: np.ndarray, n: int) -> list[float]:
    """A regress signature's output for n examples: one value each."""
    if not (value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1)):
        raise invalid_argument(
            "Expected output Tensor shape to be either [batch_size] or "
            f"[batch_size, 1] but got {_shape_text(value)}"
        )
    if value.shape[0] != n:
        raise invalid_argument(
            f"Input batch size did not match output batch size: {n} vs. {value.shape[0]}"
        )
    if value.dtype != np.float32:
        raise invalid_argument(f"Expected output Tensor of DT_FLOAT.  Got: {_dtype_text(value)}")
    return [float(v) for v in value.reshape(-1)]
