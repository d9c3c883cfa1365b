"""`python -m tfs_model_server` runs the model server."""

import sys

from .main import main

sys.exit(main())
