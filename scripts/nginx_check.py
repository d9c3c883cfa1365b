"""Run `nginx -t` on every nginx.conf variant serve renders (fast path, user code, multi-model):
the unit tests in test/unit/sagemaker_serving/launcher/test_nginx_config.py, for the pipeline.

    python scripts/nginx_check.py        # exit 0 when nginx accepts every rendered variant
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = (
    Path(__file__).resolve().parents[1]
    / "test/unit/sagemaker_serving/launcher/test_nginx_config.py"
)

if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", str(TESTS)]))
