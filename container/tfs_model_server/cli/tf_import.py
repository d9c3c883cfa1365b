"""TensorFlow's runtime without `import tensorflow`'s API tree: the model server's start-up.

`import tensorflow` runs the package's `__init__`, which imports every public API module
(tf.data, tf.distribute, autograph, feature columns, the v1 compat tree ...) and then Keras:
1.8 s on a 2-core machine, over half of it modules the model server never uses. Like TF
Serving, the model server needs the C++ runtime with its kernels, Graph, Session, the
SavedModel loader and a few tensor helpers (`tfs_model_server.tf_runtime`).

`load_runtime()` puts a lazy `tensorflow` package in `sys.modules`, imports those modules
(the C++ runtime loads with every kernel, as with the full import) and switches TF2
behaviour on, as the package's `__init__` does. The first attribute anything reads from the
`tensorflow` package itself (`tf.constant`, `tf.keras`) runs the real `__init__` into it, so
other code that imports TensorFlow still gets all of it.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


class LazyTensorFlow(ModuleType):
    """The `tensorflow` package, its `__init__` not run until an attribute of it is read."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        complete(self)
        return getattr(self, name)


def complete(package: ModuleType) -> None:
    """Run TensorFlow's own `__init__` into the lazy package (once)."""
    if type(package) is not LazyTensorFlow:
        return
    # no more __getattr__ while the real init runs (it reads its own globals)
    package.__class__ = ModuleType  # type: ignore[assignment]
    spec = package.__spec__
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(package)


def _lazy_package() -> ModuleType:
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("tensorflow is not installed")
    package = LazyTensorFlow("tensorflow")
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__loader__ = spec.loader
    package.__package__ = "tensorflow"
    return package


def load_runtime() -> ModuleType:
    """TensorFlow's runtime modules the model server uses; the API tree only when asked for."""
    if "tensorflow" not in sys.modules:
        sys.modules["tensorflow"] = _lazy_package()
    from tensorflow.python.compat import v2_compat

    v2_compat.enable_v2_behavior()  # tf2.enable() and the rest, as the package's __init__
    return importlib.import_module("tfs_model_server.tf_runtime")
