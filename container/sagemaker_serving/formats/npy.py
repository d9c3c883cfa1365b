"""application/x-npy bodies (.npy arrays, .npz archives) as TF Serving REST requests.

An array is the instances (a 0-d array one instance); in a multi-input signature it feeds the
input that best matches its dtype and rank, as `inputs`. A structured array or a .npz archive
is columnar `inputs`, one column per field or member name. NaN/Infinity are bare tokens,
bytes are {"b64": ...}.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

import orjson

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request_body import ModelRequest, dumps, json_key, wrap
from sagemaker_serving.formats.signature import InputSpec

__all__ = ["decode_npy", "npy_array", "npy_header", "npy_target"]


def decode_npy(body: bytes, inputs: Mapping[str, InputSpec] | None) -> ModelRequest:
    """A .npy or .npz body; `inputs` (None: unknown) picks the input a lone array feeds."""
    import numpy as np

    if not body.startswith((b"\x93NUMPY", b"PK\x03\x04")):  # else numpy tries it as a pickle
        raise PayloadError(
            "Could not read application/x-npy body: neither a .npy array nor a .npz archive", 400
        )
    try:
        loaded = npy_array(body)
    except PayloadError:
        raise
    except Exception as err:  # numpy raises ValueError, OSError, EOFError, zipfile errors
        reason = str(err)
        if "pickle" in reason:  # numpy's advice (allow_pickle=) is for its caller, not ours
            reason = "an array of Python objects (pickled) is refused"
        raise PayloadError(f"Could not read application/x-npy body: {reason}", 400) from None
    if isinstance(loaded, np.lib.npyio.NpzFile):  # .npz: one array per input name
        with loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        if not arrays:
            raise PayloadError("application/x-npy: the .npz archive holds no arrays", 400)
        sizes = {len(a) if a.ndim else 1 for a in arrays.values()}
        return ModelRequest(_columns(arrays), sizes.pop() if len(sizes) == 1 else None)
    array = loaded
    records = len(array) if array.ndim else 1
    if array.dtype.names:  # structured array: one column per field name
        fields = {name: np.ascontiguousarray(array[name]) for name in array.dtype.names}
        return ModelRequest(_columns(fields), records)
    if inputs is None or len(inputs) <= 1:
        encoded = _array_json(array)
        return ModelRequest(
            wrap("instances", encoded if array.ndim else b"[" + encoded + b"]"), records
        )
    return ModelRequest(_columns({npy_target(array, inputs): array}), records)


def _columns(arrays: Mapping[str, Any]) -> bytes:
    """`{"inputs": {name: array, ...}}`: the columnar request of named arrays."""
    columns = b",".join(json_key(name) + b":" + _array_json(a) for name, a in arrays.items())
    return wrap("inputs", b"{" + columns + b"}")


def npy_array(body: bytes) -> Any:
    """A .npy body's array, over the body's own bytes when it is a plain array (np.load would
    copy them: an asynchronous endpoint's body is up to 1 GiB); else np.load's (an .npz
    archive: its NpzFile). A plain array cut short is a 400 that says what its header
    promised and what came."""
    import numpy as np

    header = npy_header(body)
    if header is not None:
        shape, fortran, dtype, offset = header
        count = int(np.prod(shape, dtype=np.int64))
        size = count * dtype.itemsize
        if len(body) - offset < size:
            raise PayloadError(
                f"application/x-npy: the array's header says {size} bytes of values "
                f"({dtype} {shape}), the body holds {len(body) - offset}",
                400,
            )
        if len(body) - offset == size:
            flat = np.frombuffer(body, dtype, count, offset)
            return flat.reshape(shape, order="F" if fortran else "C")
    return np.load(io.BytesIO(body), allow_pickle=False)


def npy_header(body: bytes) -> tuple[tuple[int, ...], bool, Any, int] | None:
    """A plain .npy array's shape, order, dtype and where its values start; None for a body
    numpy must read (an .npz archive, a pickled or structured array, a malformed header)."""
    import numpy as np

    if body[:6] != b"\x93NUMPY" or body[6:7] not in (b"\x01", b"\x02"):
        return None
    stream = io.BytesIO(body)  # shares body
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0
        if version != (1, 0):
            read_header = np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except Exception:
        return None
    if dtype.hasobject or dtype.names:
        return None
    return shape, fortran, dtype, stream.tell()


def npy_target(array: Any, inputs: Mapping[str, InputSpec]) -> str:
    """The input a lone array feeds in a multi-input signature: the best dtype/rank match."""

    def score(spec: InputSpec) -> tuple[int, int]:
        rank_ok = spec.shape is None or len(spec.shape) == array.ndim
        string_ok = (spec.dtype == "DT_STRING") == (array.dtype.kind in "SU")
        return int(rank_ok), int(string_ok)

    best = max(inputs.values(), key=score)
    return best.name


def _array_json(array: Any) -> bytes:
    """A numpy array (or 0-d array) as JSON; NaN/Infinity as bare tokens, bytes as b64."""
    import numpy as np

    kind = array.dtype.kind
    if kind in "biuf":
        nonfinite = kind == "f" and not bool(np.isfinite(array).all())
        if array.ndim and not nonfinite and array.dtype.isnative:  # (ascontiguousarray: 0-d -> 1-d)
            try:
                return orjson.dumps(np.ascontiguousarray(array), option=orjson.OPT_SERIALIZE_NUMPY)
            except TypeError:
                pass
        return dumps(array.tolist(), nonfinite)
    if kind == "S":
        return dumps(_b64_tree(array.tolist()))
    if kind == "U":
        return dumps(array.tolist())
    if kind in "Mm":
        return dumps(array.astype(str).tolist())
    raise PayloadError(f"application/x-npy: unsupported array dtype {array.dtype}", 400)


def _b64_tree(value: Any) -> Any:
    if isinstance(value, list):
        return [_b64_tree(item) for item in value]
    return {"b64": base64.b64encode(value).decode("ascii")}
