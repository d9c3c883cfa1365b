"""import_tensorflow: TensorFlow without its eager import of Keras, in a fresh interpreter (this
one has imported both already)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from tfs_model_server.cli.tf_import import import_tensorflow
tf = import_tensorflow()
after_import = "keras" in sys.modules
finders_left = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_KerasLater"]
works = float(tf.constant(2.0) * 3.0)
import keras  # afterwards Keras imports as usual
print(json.dumps({"keras_during": after_import, "finders": finders_left, "works": works,
                  "keras_after": hasattr(keras, "Model"), "again": import_tensorflow() is tf}))
"""


def test_tensorflow_imports_without_keras_and_keras_still_imports_later():
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {
        "keras_during": False,
        "finders": [],
        "works": 6.0,
        "keras_after": True,
        "again": True,
    }
