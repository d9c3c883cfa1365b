"""TensorFlow imported without Keras: the model server's start-up is mostly `import tensorflow`.

`import tensorflow` ends by importing Keras ("an eager load ... so that registration of
optimizers in the SavedModel registry" happens, in a try/except ImportError). The model server
loads SavedModels into a session, as TF Serving does, and never needs Keras; importing it costs
0.5-1.3 s (more when scikit-learn is installed beside it, which Keras's wrappers import). During
the import only, `keras` fails to import; afterwards it imports normally (`tf.keras` still
works if anything asks for it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType


class _NotNow(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        raise ImportError("keras is not imported while the model server imports TensorFlow")


class _KerasLater(importlib.abc.MetaPathFinder):
    """Finds `keras` where it is (TensorFlow looks up its folder) but will not run it."""

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != "keras":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _NotNow()
        return spec


def import_tensorflow() -> ModuleType:
    """`import tensorflow`, without its eager import of Keras."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    finder = _KerasLater()
    sys.meta_path.insert(0, finder)
    try:
        import tensorflow
    finally:
        sys.meta_path.remove(finder)
    return tensorflow
