"""Models made for the image tests: one whose loading takes a chosen amount of memory."""

from __future__ import annotations

from pathlib import Path

from example_models._paths import build_version
from example_models._quiet import quiet_tf


def resident_state_model(dest: Path, state_bytes: int, version: int = 1) -> Path:
    """A TF1 SavedModel (y = 2x) whose main op, run when the model server loads it, fills a
    local variable of `state_bytes` with ones: small on disk, that much resident once loaded."""

    def write(path: Path) -> None:
        import tensorflow as tf_root

        tf = tf_root.compat.v1
        with quiet_tf(), tf_root.Graph().as_default(), tf.Session() as sess:
            x = tf.placeholder(tf.float32, shape=[None], name="x")
            two = tf.Variable(2.0, name="two", use_resource=False)
            y = tf.identity(x * two, name="y")
            # not saved (a local variable): the main op fills it at load time
            state = tf.Variable(
                tf.ones([state_bytes // 4], tf.float32),
                name="state",
                use_resource=False,
                collections=[tf.GraphKeys.LOCAL_VARIABLES],
            )
            info = tf.saved_model.utils.build_tensor_info
            signature = tf.saved_model.signature_def_utils.build_signature_def(
                {"x": info(x)},
                {"y": info(y)},
                tf.saved_model.signature_constants.PREDICT_METHOD_NAME,
            )
            sess.run(two.initializer)
            builder = tf.saved_model.builder.SavedModelBuilder(str(path))
            builder.add_meta_graph_and_variables(
                sess,
                [tf.saved_model.tag_constants.SERVING],
                signature_def_map={
                    tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature
                },
                main_op=tf.group(state.initializer),
            )
            builder.save()

    return build_version(dest, version, write)
