"""Keep TensorFlow's Python deprecation chatter out of a build's output."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_tf() -> Iterator[None]:
    """Raise the `tensorflow` logger to ERROR for the duration of the block."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
