"""SageMaker model directories with user code (`code/`) for the image tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import example_models as em

# input_handler/output_handler, the AWS container's contract, with a helper from code/lib
INFERENCE_WITH_LIB = """
import json

import scaling  # code/lib/scaling.py


def input_handler(data, context):
    body = json.loads(data.read().decode("utf-8"))
    return json.dumps({"instances": [scaling.scale(x) for x in body["x"]]})


def output_handler(response, context):
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    predictions = response.json()["predictions"]
    return json.dumps({"y": predictions, "handled_by": "inference.py"}), "application/json"
"""

SCALING = """
FACTOR = 2.0


def scale(x):
    return x * FACTOR
"""

# handler(data, context) that takes its time, saying in the log when a request has begun
SLOW_HANDLER = """
import json
import time


def handler(data, context):
    body = json.loads(data.read().decode("utf-8"))
    print(f"handler began request {body['id']}", flush=True)
    time.sleep(body["seconds"])
    return json.dumps({"id": body["id"], "done": True}), "application/json"
"""

PLAIN_HANDLERS = """
def input_handler(data, context):
    return data.read().decode("utf-8")


def output_handler(response, context):
    return response.content, "application/json"
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def half_plus_three(root: Path) -> Path:
    """root/half_plus_three/{1,2}/: y = 0.5 x + 3, TF Serving's classic test model."""
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1, 2))
    return root


def with_code_and_lib(root: Path) -> Path:
    """half_plus_three with code/inference.py importing a module of code/lib."""
    half_plus_three(root)
    return write(root, {"code/inference.py": INFERENCE_WITH_LIB, "code/lib/scaling.py": SCALING})


def with_slow_handler(root: Path) -> Path:
    half_plus_three(root)
    return write(root, {"code/inference.py": SLOW_HANDLER})


def with_requirements(root: Path, requirement: str) -> Path:
    """half_plus_three with code/inference.py and a code/requirements.txt (no code/lib)."""
    half_plus_three(root)
    return write(
        root, {"code/inference.py": PLAIN_HANDLERS, "code/requirements.txt": requirement + "\n"}
    )


# imports a package that only code/requirements.txt provides
TABULATE_HANDLERS = """
import json

import tabulate


def input_handler(data, context):
    return data.read().decode("utf-8")


def output_handler(response, context):
    return json.dumps({"tabulate": tabulate.__version__, **response.json()}), "application/json"
"""


def with_tabulate_requirement(root: Path, version: str) -> Path:
    half_plus_three(root)
    files = {
        "code/inference.py": TABULATE_HANDLERS,
        "code/requirements.txt": f"tabulate=={version}\n",
    }
    return write(root, files)
