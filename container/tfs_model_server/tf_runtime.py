"""The parts of TensorFlow the model server runs on, in one place.

They come from TensorFlow's own modules rather than the `tf.` API tree, so that the model
server starts without importing that tree (see `tfs_model_server.cli.tf_import`). TensorFlow
is pinned, and `test_tf_import.py` checks each name against its public `tf.` twin.
"""

from __future__ import annotations

from tensorflow.python.client.session import Session
from tensorflow.python.framework.dtypes import as_dtype, string
from tensorflow.python.framework.errors import OpError
from tensorflow.python.framework.ops import Graph
from tensorflow.python.framework.tensor_util import MakeNdarray as make_ndarray
from tensorflow.python.framework.versions import __version__ as version
from tensorflow.python.lib.io.tf_record import tf_record_iterator
from tensorflow.python.platform.tf_logging import get_logger
from tensorflow.python.saved_model.loader_impl import load as load_saved_model

__all__ = [
    "Graph",
    "OpError",
    "Session",
    "as_dtype",
    "get_logger",
    "load_saved_model",
    "make_ndarray",
    "string",
    "tf_record_iterator",
    "version",
]
