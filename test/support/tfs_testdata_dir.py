"""Where TF Serving's own test models live in this repo (tfs_testdata/README.md: their source
commit and licence)."""

from pathlib import Path

TESTDATA = Path(__file__).resolve().parent / "tfs_testdata"
