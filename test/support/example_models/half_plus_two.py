"""TF1 half_plus_two / half_plus_three: a port of TF Serving's saved_model_half_plus_two.py.

The graph computes y = a*x + b, y2 = a*x + c and y3 = a2*x2 + c2 with a = a2 = 0.5,
c = c2 = 3 and b = 2 (half_plus_two) or 3 (half_plus_three). x and x2 are parsed from
serialized tf.Example protos fed to "tf_example". Signatures, as in TF Serving's
testdata/saved_model_half_plus_two_cpu/00000123:

- serving_default   predict   x (x:0) -> y (y:0)
- regress_x_to_y    regress   inputs (tf_example:0) -> outputs (y:0)
- regress_x_to_y2   regress   inputs (tf_example:0) -> outputs (y2:0)
- regress_x2_to_y3  regress   inputs (x2:0) -> outputs (y3:0)
- classify_x_to_y   classify  inputs (tf_example:0) -> scores (y:0)

The asset file assets/foo.txt is assigned to variable "filename_tensor" by the main op.
Variables are TF1 reference variables (VariableV2), like the original's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._paths import PathLike, build_version
from ._quiet import quiet_tf

ASSET_FILENAME = "foo.txt"
ASSET_CONTENTS = "asset-file-contents"


def half_plus_two_tf1(dest: PathLike, version: int = 123) -> Path:
    """Write TF Serving's half_plus_two test model (y = 0.5x + 2) to `dest/<version>`."""
    return build_version(dest, version, lambda path: _write(path, b=2.0))


def half_plus_three_tf1(dest: PathLike, versions: Iterable[int] = (123, 124)) -> Path:
    """Write half_plus_three (y = 0.5x + 3), one SavedModel per version, under `dest`."""
    for version in versions:
        build_version(dest, version, lambda path: _write(path, b=3.0))
    return Path(dest)


def _signature(tf: Any, method: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> Any:
    """A SignatureDef of `method` mapping aliases to tensors."""
    info = tf.saved_model.utils.build_tensor_info
    return tf.saved_model.signature_def_utils.build_signature_def(
        {alias: info(t) for alias, t in inputs.items()},
        {alias: info(t) for alias, t in outputs.items()},
        method,
    )


def _variable(tf: Any, value: Any, name: str, **kwargs: Any) -> Any:
    """A TF1-style reference variable (VariableV2), as the original graph had."""
    return tf.Variable(value, name=name, use_resource=False, **kwargs)


def _asset_assign_op(tf: Any, asset_dir: Path) -> Any:
    """Register foo.txt as an asset; return the op assigning its name to a variable."""
    asset = asset_dir / ASSET_FILENAME
    asset.write_text(ASSET_CONTENTS)
    tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, tf.constant(str(asset)))
    filename = _variable(tf, ASSET_FILENAME, "filename_tensor", trainable=False, collections=[])
    return filename.assign(ASSET_FILENAME)


def _write(path: Path, b: float) -> None:
    import tensorflow as tf_root

    tf = tf_root.compat.v1
    with (
        quiet_tf(),
        tf_root.Graph().as_default(),
        tf.Session() as sess,
        tempfile.TemporaryDirectory() as asset_dir,
    ):
        builder = tf.saved_model.builder.SavedModelBuilder(str(path))
        with tf.device("/cpu:0"):
            a = _variable(tf, 0.5, "a")
            b_var = _variable(tf, b, "b")
            c = _variable(tf, 3.0, "c")
            serialized = tf.placeholder(tf.string, name="tf_example", shape=[None])
            features = {
                "x": tf.FixedLenFeature([1], dtype=tf.float32),
                "x2": tf.FixedLenFeature([1], dtype=tf.float32, default_value=[0.0]),
            }
            parsed = tf.parse_example(serialized, features)
            x = tf.identity(parsed["x"], name="x")
            y = tf.identity(tf.add(tf.multiply(a, x), b_var), name="y")
            y2 = tf.identity(tf.add(tf.multiply(a, x), c), name="y2")
            x2 = tf.identity(parsed["x2"], name="x2")
            # Separate variables for the x2 path, as in the original (keeps optimizers
            # from fusing the y/y2 and y3 paths).
            a2 = _variable(tf, 0.5, "a2")
            c2 = _variable(tf, 3.0, "c2")
            y3 = tf.identity(tf.add(tf.multiply(a2, x2), c2), name="y3")
        assign_filename = _asset_assign_op(tf, Path(asset_dir))
        consts = tf.saved_model.signature_constants
        regress = consts.REGRESS_METHOD_NAME
        signatures = {
            "regress_x_to_y": _signature(
                tf, regress, {consts.REGRESS_INPUTS: serialized}, {consts.REGRESS_OUTPUTS: y}
            ),
            "regress_x_to_y2": _signature(
                tf, regress, {consts.REGRESS_INPUTS: serialized}, {consts.REGRESS_OUTPUTS: y2}
            ),
            "regress_x2_to_y3": _signature(
                tf, regress, {consts.REGRESS_INPUTS: x2}, {consts.REGRESS_OUTPUTS: y3}
            ),
            "classify_x_to_y": _signature(
                tf,
                consts.CLASSIFY_METHOD_NAME,
                {consts.CLASSIFY_INPUTS: serialized},
                {consts.CLASSIFY_OUTPUT_SCORES: y},
            ),
            consts.DEFAULT_SERVING_SIGNATURE_DEF_KEY: _signature(
                tf, consts.PREDICT_METHOD_NAME, {"x": x}, {"y": y}
            ),
        }
        sess.run(tf.global_variables_initializer())
        builder.add_meta_graph_and_variables(
            sess,
            [tf.saved_model.tag_constants.SERVING],
            signature_def_map=signatures,
            assets_collection=tf.get_collection(tf.GraphKeys.ASSET_FILEPATHS),
            main_op=tf.group(assign_filename),
        )
        builder.save()
