"""User code in a sound environment (environments/), through the whole native stack: the batch
inference post's TFRecord handler with `tensorflow` in its requirements.txt, the object
detection post's image -> NumPy handler, requirements that pin the packages the service itself
runs on, two multi-model models whose pins conflict, side by side; and never a second copy of
an extension module in any process."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pytest
import requests

from conftest import REPO, VENV_BIN, serve_stack
from perf import wrk_load

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not wrk_load.available(), reason="wrk is not installed"),
]

sys.path.insert(0, str(REPO / "scripts"))
import classic_image_jobs as cij  # noqa: E402  (the classic jobs' data set builders)

CRASHES = ("SIGSEGV", "SIGABRT", "SIGBUS", "Fatal Python error")

# ----- the packages the service runs on, pinned by user code to other versions ---------------

PINS = {
    "numpy": "1.26.4",
    "protobuf": "5.29.5",
    "grpcio": "1.71.0",
    "requests": "2.31.0",
}
OTHER_NUMPY = "2.2.6"  # a second numpy 2, beside the service's and 1.26

ANSWER = """
def output_handler(response, context):
    doc = response.json()
    doc["version"] = VERSION
    return json.dumps(doc), "application/json"
"""
PINNED_CODE = {
    "numpy": """
        import json
        import numpy
        VERSION = numpy.__version__

        def input_handler(data, context):
            values = numpy.asarray(json.loads(data.read()), dtype=numpy.float32)
            return json.dumps({"instances": values.tolist()})
    """,
    "protobuf": """
        import json
        import google.protobuf
        from google.protobuf import json_format, struct_pb2
        VERSION = google.protobuf.__version__

        def input_handler(data, context):
            message = json_format.Parse(json.dumps({"instances": json.loads(data.read())}),
                                        struct_pb2.Struct())
            return json_format.MessageToJson(message)
    """,
    "grpcio": """
        import json
        import grpc
        VERSION = grpc.__version__

        def input_handler(data, context):
            grpc.channel_ready_future(context.channel).result(timeout=10)
            return json.dumps({"instances": json.loads(data.read())})
    """,
    "requests": """
        import json
        import requests
        VERSION = requests.__version__

        def handler(data, context):
            body = json.dumps({"instances": json.loads(data.read())})
            doc = requests.post(context.rest_uri, data=body, timeout=30).json()
            doc["version"] = VERSION
            return json.dumps(doc), "application/json"
    """,
}
PINNED_CODE = {
    name: textwrap.dedent(code) + (ANSWER if name != "requests" else "")
    for name, code in PINNED_CODE.items()
}


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """The pinned wheels, downloaded once (pip's cache makes later sessions quick)."""
    directory = tmp_path_factory.getbasetemp() / "pinned-wheels"
    wanted = [f"{name}=={version}" for name, version in PINS.items()]
    if not directory.is_dir():
        subprocess.run(
            [str(VENV_BIN / "pip"), "download", "--no-deps", "-q", "-d", str(directory), *wanted],
            check=True,
            timeout=600,
        )
    return directory


def half_plus_three(root: Path) -> Path:
    import example_models as em

    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    return root


def write_code(code: Path, text: str, requirements: str, wheels: Path | None = None) -> None:
    code.mkdir(parents=True, exist_ok=True)
    (code / "inference.py").write_text(textwrap.dedent(text))
    (code / "requirements.txt").write_text(requirements)
    if wheels is not None:
        shutil.copytree(wheels, code / "wheelhouse")


def stack_processes(server, marker: str) -> list[psutil.Process]:
    """serve and every live process under it, and the handler pools started for its models
    (detached: found by `marker` in their command line). A process that ended and waits to be
    reaped (serve reaps the pools it adopted within its poll interval) is not one."""
    root = psutil.Process(server.proc.pid)
    found = {p.pid: p for p in [root, *root.children(recursive=True)]}
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found[proc.pid] = proc
    return [p for p in found.values() if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def is_handler_process(proc: psutil.Process) -> bool:
    """A process of a handler pool (environments.host: its master, or a worker)."""
    try:
        return "environments.host" in " ".join(proc.cmdline())
    except psutil.NoSuchProcess:
        return False


def extension_copies(processes: list[psutil.Process]) -> dict[str, dict[str, set[str]]]:
    """Per process, shared objects of one name mapped from more than one file: two copies of
    one extension module (or library) in an interpreter."""
    problems = {}
    for proc in processes:
        try:
            with open(f"/proc/{proc.pid}/maps") as maps:
                paths = {line.split(None, 5)[5].strip() for line in maps if ".so" in line}
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        by_name: dict[str, set[str]] = defaultdict(set)
        for path in paths:
            if path.startswith("/") and ".so" in os.path.basename(path):
                by_name[os.path.basename(path)].add(os.path.realpath(path))
        doubled = {name: files for name, files in by_name.items() if len(files) > 1}
        if doubled:
            problems[f"{proc.pid} {' '.join(proc.cmdline()[:4])}"] = doubled
    return problems


def load(server, requests_count: int = 2000, url: str | None = None) -> wrk_load.Load:
    """At least `requests_count` POSTs with wrk, in rounds of a few seconds (wrk runs its
    whole duration even once its threads stopped); the rounds summed."""
    rounds: list[wrk_load.Load] = []
    deadline = time.monotonic() + 300
    while sum(r.requests for r in rounds) < requests_count and time.monotonic() < deadline:
        left = requests_count - sum(r.requests for r in rounds)
        rounds.append(
            wrk_load.post(
                url or f"{server.url}/invocations",
                b"[1.0, 2.0]",
                "application/json",
                connections=8,
                seconds=3,
                requests=left,
            )
        )
    return wrk_load.Load(
        requests=sum(r.requests for r in rounds),
        seconds=sum(r.seconds for r in rounds),
        non200=sum(r.non200 for r in rounds),
        socket_errors=sum(r.socket_errors for r in rounds),
        p50_ms=max(r.p50_ms for r in rounds),
        p99_ms=max(r.p99_ms for r in rounds),
    )


@pytest.mark.parametrize("package", list(PINS))
def test_a_pin_of_a_package_the_service_uses_wins_for_user_code(tmp_path, wheelhouse, package):
    models = half_plus_three(tmp_path / "model")
    version = PINS[package]
    write_code(models / "code", PINNED_CODE[package], f"{package}=={version}\n", wheelhouse)
    with serve_stack(models, tmp_path) as server:
        for _ in range(4):  # each worker, each handler process
            reply = requests.post(f"{server.url}/invocations", data="[1.0, 2.0]", timeout=60)
            assert reply.status_code == 200, reply.text
            assert reply.json() == {"predictions": [3.5, 4.0], "version": version}
        result = load(server)
        assert result.requests >= 2000 and result.errors == 0, result
        assert requests.get(f"{server.url}/ping", timeout=10).status_code == 200
        assert extension_copies(stack_processes(server, str(tmp_path))) == {}
        log = server.log()
    assert "handlers run in 2 process(es) of their own" in log
    assert "it brings its own" in log
    assert not [word for word in CRASHES if word in log], log[-3000:]


# ----- the batch inference post: TFRecord of tf.Example, TensorFlow in requirements.txt -------

TFRECORD_POST = """
    import base64
    import io
    import json
    from string import whitespace

    import requests
    import tensorflow as tf
    from google.protobuf.json_format import MessageToDict


    def input_handler(data, context):
        if context.request_content_type == "application/x-tfexample":
            example = tf.train.Example()
            example.ParseFromString(data.read())
            features = MessageToDict(example.features)["feature"]
            image = features["image/encoded"]["bytesList"]["value"][0]
            return json.dumps({"instances": [{"b64": image}]})
        content_type = context.request_content_type or "Unknown"
        _fail(415, 'Unsupported content type "{}"'.format(content_type))


    def output_handler(response, context):
        if response.status_code != 200:
            _fail(response.status_code, response.content.decode("utf-8"))
        text = response.content.decode("utf-8").translate(dict.fromkeys(map(ord, whitespace)))
        return text, context.accept_header


    def _fail(code, message):
        raise ValueError("Error: {}, {}".format(code, message))
"""


def model_dir_with(tmp_path: Path, base: Path, version: str) -> Path:
    models = tmp_path / "model"
    shutil.copytree(base / "1", models / "classifier" / version)
    return models


def post_invocation(server, body: bytes, content_type: str) -> requests.Response:
    """POST /invocations, answered 200."""
    reply = requests.post(
        f"{server.url}/invocations", data=body, headers={"Content-Type": content_type}, timeout=60
    )
    assert reply.status_code == 200, reply.text
    return reply


def own_answer(server, jpeg: bytes) -> dict:
    """What the model server itself answers for this image (no handler in between)."""
    body = {"instances": [{"b64": base64.b64encode(jpeg).decode()}]}
    port = server.rest_ports[0]
    reply = requests.post(
        f"http://127.0.0.1:{port}/v1/models/classifier:predict", json=body, timeout=60
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["predictions"][0]


def test_the_tfrecord_posts_handler_with_tensorflow_in_its_requirements(tmp_path, digits_model):
    models = model_dir_with(tmp_path, digits_model, "1538687370")
    write_code(models / "code", TFRECORD_POST, "tensorflow==2.21.0\n")
    data = cij.build_dataset(tmp_path / "data", n=12, records_per_file=6)
    examples = [cij.image_example(data.jpeg_bytes(i), name) for i, name in enumerate(data.names)]
    with serve_stack(models, tmp_path) as server:
        expected = [own_answer(server, data.jpeg_bytes(i)) for i in range(len(data.names))]
        for example, answer in zip(examples, expected, strict=True):
            reply = post_invocation(server, example, "application/x-tfexample")
            assert reply.json() == {"predictions": [answer]}
        assert extension_copies(stack_processes(server, str(tmp_path))) == {}
        log = server.log()
    assert "the container's tensorflow used as installed" in log
    assert "requirements.txt: installed nothing new" in log  # pip took TensorFlow as it is
    assert not [word for word in CRASHES if word in log], log[-3000:]
    # the post's Batch Transform job: TFRecord split, one record per request
    out = tmp_path / "out"
    job = subprocess.run(
        [
            str(VENV_BIN / "tfs-batch-transform"),
            "--model-dir",
            str(models),
            "--input",
            str(data.tfrecord_dir),
            "--output",
            str(out),
            "--content-type",
            "application/x-tfexample",
            "--accept",
            "application/json",
            "--split-type",
            "TFRecord",
            "--batch-strategy",
            "SingleRecord",
            "--assemble-with",
            "Line",
            "--progress",
            "log",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    lines = []
    for name, count in data.files:
        part = (out / f"{name}.out").read_text().splitlines()
        assert len(part) == count
        lines += part
    assert [json.loads(line) for line in lines] == [{"predictions": [a]} for a in expected]


# ----- the object detection post: an image as a NumPy array, then a list ----------------------

IMAGE_AS_ARRAY = """
    import io
    import json

    import numpy as np
    {decoder_import}


    def input_handler(data, context):
        if context.request_content_type != "application/x-image":
            raise ValueError("unsupported content type {{}}".format(context.request_content_type))
        pixels = {decode}
        array = np.asarray(pixels, dtype=np.float32) / 255.0
        return json.dumps({{"instances": [array.tolist()]}})


    def output_handler(response, context):
        if response.status_code != 200:
            raise ValueError(response.content.decode("utf-8"))
        return response.content, "application/json"
"""
DECODERS = {
    "pillow": (
        "from PIL import Image",
        'Image.open(io.BytesIO(data.read())).convert("RGB").resize((64, 64))',
        "numpy\npillow\n",
    ),
    "opencv": (
        "import cv2",
        "cv2.resize(cv2.cvtColor(cv2.imdecode(np.frombuffer(data.read(), np.uint8), "
        "cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB), (64, 64), interpolation=cv2.INTER_LINEAR)",
        "numpy\nopencv-python-headless\n",
    ),
}


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory) -> Path:
    """A small conv net on 64x64x3 float images (example_models), built once."""
    import example_models as em

    return em.ensure_built("conv", tmp_path_factory.getbasetemp() / "shared-models" / "conv")


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_the_object_detection_posts_image_to_numpy_handler(tmp_path, conv_model, decoder):
    import numpy as np
    from PIL import Image

    models = tmp_path / "model"
    shutil.copytree(conv_model, models / "conv")
    decoder_import, decode, requirements = DECODERS[decoder]
    code = IMAGE_AS_ARRAY.format(decoder_import=decoder_import, decode=decode)
    write_code(models / "code", code, requirements)
    jpegs = list(cij.random_jpegs(3, seed=7))
    with serve_stack(models, tmp_path) as server:
        for jpeg in jpegs:
            reply = post_invocation(server, jpeg, "application/x-image")
            image = Image.open(__import__("io").BytesIO(jpeg)).convert("RGB").resize((64, 64))
            pixels = (np.asarray(image, dtype=np.float32) / 255.0).tolist()
            port = server.rest_ports[0]
            own = requests.post(
                f"http://127.0.0.1:{port}/v1/models/conv:predict",
                json={"instances": [pixels]},
                timeout=60,
            ).json()
            got = np.asarray(reply.json()["predictions"])
            # the two decoders' resizes differ by a pixel value here and there
            tolerance = 1e-6 if decoder == "pillow" else 0.05
            assert np.allclose(got, np.asarray(own["predictions"]), atol=tolerance)
        assert extension_copies(stack_processes(server, str(tmp_path))) == {}
        log = server.log()
    assert not [word for word in CRASHES if word in log], log[-3000:]


# ----- multi-model: two models whose numpy pins conflict ----------------------------------


def tree_rss(server, marker: str) -> int:
    total = 0
    for proc in stack_processes(server, marker):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def invoke(server, name: str, results: dict[str, wrk_load.Load]) -> None:
    results[name] = load(server, 1000, f"{server.url}/models/{name}/invoke")


def test_two_multi_model_models_with_conflicting_pins_side_by_side(tmp_path):
    root = tmp_path / "models"
    versions = {"old": PINS["numpy"], "new": OTHER_NUMPY}
    for name, version in versions.items():
        half_plus_three(root / name)
        write_code(root / name / "code", PINNED_CODE["numpy"], f"numpy=={version}\n")
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    run = tmp_path / "run"
    run.mkdir()
    peaks = []
    with serve_stack(root, run, env) as server:
        for _cycle in range(2):
            for name in versions:
                body = {"model_name": name, "url": str(root / name)}
                reply = requests.post(f"{server.url}/models", json=body, timeout=600)
                assert reply.status_code == 200, reply.text
            results: dict[str, wrk_load.Load] = {}
            threads = [
                threading.Thread(target=invoke, args=(server, name, results)) for name in versions
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            for name, version in versions.items():
                assert results[name].errors == 0 and results[name].requests >= 1000, results
                reply = requests.post(
                    f"{server.url}/models/{name}/invoke", data="[1.0, 2.0]", timeout=60
                )
                assert reply.json() == {"predictions": [3.5, 4.0], "version": version}
            assert extension_copies(stack_processes(server, str(root))) == {}
            peaks.append(tree_rss(server, str(root)))
            for name in versions:
                reply = requests.delete(f"{server.url}/models/{name}", timeout=120)
                assert reply.status_code == 200, reply.text
            pools = [p for p in stack_processes(server, str(root)) if p.pid != server.proc.pid]
            assert not [p for p in pools if is_handler_process(p) and _running(p)]
        log = server.log()
    assert peaks[1] <= 1.1 * peaks[0], peaks
    assert not [word for word in CRASHES if word in log], log[-3000:]


def test_a_multi_model_models_handler_processes_come_back_after_a_kill(tmp_path):
    root = tmp_path / "models"
    half_plus_three(root / "a")
    write_code(root / "a" / "code", PINNED_CODE["numpy"], "numpy\n")  # its own processes
    (root / "a" / "code" / "helper.py").write_text("X = 1\n")
    run = tmp_path / "run"
    run.mkdir()
    with serve_stack(root, run, {"SAGEMAKER_MULTI_MODEL": "true"}) as server:
        reply = requests.post(
            f"{server.url}/models", json={"model_name": "a", "url": str(root / "a")}, timeout=300
        )
        assert reply.status_code == 200, reply.text
        url = f"{server.url}/models/a/invoke"
        assert requests.post(url, data="[1.0]", timeout=60).status_code == 200
        pool = [p for p in stack_processes(server, str(root)) if is_handler_process(p)]
        masters = [p for p in pool if "--worker-fd" not in p.cmdline()]
        assert len(masters) == 1 and len(pool) > 1
        for proc in pool:  # the pool killed whole: no worker is left to answer meanwhile
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        _, alive = psutil.wait_procs(pool, timeout=30)
        assert not alive, alive
        deadline = time.monotonic() + 120
        statuses = []
        while time.monotonic() < deadline:
            reply = requests.post(url, data="[1.0]", timeout=60)
            statuses.append(reply.status_code)
            if reply.status_code == 200:
                break
            assert reply.status_code in (500, 503), reply.text  # found gone, or starting
            time.sleep(0.2)
        assert statuses[-1] == 200, statuses
        assert reply.json()["predictions"] == [3.5]
        assert requests.get(f"{server.url}/ping", timeout=10).status_code == 200
        log = server.log()
    assert "are gone: starting them again" in log
