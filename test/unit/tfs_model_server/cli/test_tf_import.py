"""load_runtime: the model server loads and runs SavedModels without TensorFlow's API tree, and
`import tensorflow` still gives all of TensorFlow afterwards. Probes run in a fresh interpreter
(this one has imported TensorFlow whole already)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

import example_models as em
from tfs_model_server import tf_runtime

PROBE = """
import json, sys
import numpy as np
from tfs_model_server.cli.tf_import import load_runtime
runtime = load_runtime()
from tfs_model_server.core.servable import Servable
from tfs_model_server.core.tensor_protos import to_proto, to_ndarray
from tfs_model_server.core.warmup import read_warmup_logs

answers = {}
for name, path, alias, x in json.loads(sys.argv[1]):
    servable = Servable(name, 1, path)
    sig = servable.signature("serving_default")
    out = servable.run(sig, {alias: np.array(x, dtype=np.float32)}, list(sig.outputs))
    answers[name] = {k: to_ndarray(to_proto(v)).ravel().tolist() for k, v in out.items()}
    answers[name + " warmup"] = len(read_warmup_logs(path))
    servable.close()
lazy = type(sys.modules["tensorflow"]).__name__
api_tree = sorted(m for m in sys.modules if m.startswith("tensorflow._api") or m == "keras")
import tensorflow as tf
works = float(tf.constant(2.0) * 3.0)
import keras
print(json.dumps({"answers": answers, "lazy_while_serving": lazy, "api_tree": api_tree,
                  "after": type(sys.modules["tensorflow"]).__name__, "works": works,
                  "version": runtime.version == tf.__version__, "keras": hasattr(keras, "Model"),
                  "tf2": tf.executing_eagerly()}))
"""


def _probe(models: list[tuple[str, str, str, list]]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(models)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _warmup_log(x: float) -> prediction_log_pb2.PredictionLog:
    request = predict_pb2.PredictRequest()
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([[x]], dtype=np.float32)))
    entry = prediction_log_pb2.PredictionLog()
    entry.predict_log.request.CopyFrom(request)
    return entry


def test_savedmodels_run_on_the_runtime_alone_and_tensorflow_imports_whole_later(
    tmp_path: Path,
) -> None:
    tf1 = em.half_plus_two_tf1(tmp_path / "tf1", version=1) / "1"
    em.write_warmup_requests(tf1, [_warmup_log(1.0), _warmup_log(4.0)])
    tf2 = em.half_plus_two_tf2(tmp_path / "tf2", version=1) / "1"
    result = _probe([("tf1", str(tf1), "x", [[1.0], [2.0]]), ("tf2", str(tf2), "x", [1.0, 2.0])])
    assert result["answers"]["tf1"] == {"y": [2.5, 3.0]}
    assert result["answers"]["tf1 warmup"] == 2
    assert list(result["answers"]["tf2"].values()) == [[2.5, 3.0]]
    assert result["lazy_while_serving"] == "LazyTensorFlow"
    assert result["api_tree"] == []
    assert result["after"] == "module"
    assert result["works"] == 6.0
    assert result["version"] and result["keras"] and result["tf2"]


@pytest.mark.parametrize(
    ("ours", "public"),
    [
        (tf_runtime.Graph, tf.Graph),
        (tf_runtime.OpError, tf.errors.OpError),
        (tf_runtime.Session, tf.compat.v1.Session),
        (tf_runtime.as_dtype, tf.as_dtype),
        (tf_runtime.get_logger, tf.get_logger),
        (tf_runtime.load_saved_model, tf.compat.v1.saved_model.loader.load),
        (tf_runtime.make_ndarray, tf.make_ndarray),
        (tf_runtime.string, tf.string),
        (tf_runtime.tf_record_iterator, tf.compat.v1.io.tf_record_iterator),
        (tf_runtime.version, tf.__version__),
    ],
)
def test_each_runtime_name_is_its_public_twin(ours: object, public: object) -> None:
    assert ours is public or ours == public
