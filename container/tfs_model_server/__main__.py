"""`python -m tfs_model_server` runs the model server."""

import sys

from tfs_model_server.cli.main import main

sys.exit(main())
