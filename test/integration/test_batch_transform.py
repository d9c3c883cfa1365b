"""tfs-batch-transform end to end: real containers (`serve`: nginx + model server + Python
service) on loopback, half_plus_three for JSON/CSV/JSON Lines and DataProcessing, the digits
CNN for JPEG images (one per file) and TFRecord files; a job killed with SIGKILL and resumed;
two containers sharing a job; retries against a flaky HTTP server; S3 through moto's server."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

import example_models as em
from conftest import REPO, serve_stack
from sagemaker_serving.formats.tfrecord import frame_tfrecord
from tfs_batch_transform import JobConfig, JobSummary, run_job
from tfs_batch_transform.job import FAILURE_REPORT
from tfs_batch_transform.progress import LogProgress

BATCH_ENV = {"SAGEMAKER_BATCH": "true"}
TFRECORD_HANDLER = REPO / "examples" / "tfrecord_examples" / "code" / "inference.py"
# code/inference.py of the digits container: JPEG bodies as the classic walkthrough sends them,
# everything else to the TFRecord example's handlers (in code/lib), unchanged.
DIGITS_INFERENCE = """
import base64
import json

import tfrecord_inference


def input_handler(data, context):
    if context.request_content_type == "application/x-image":
        return json.dumps({"instances": [{"b64": base64.b64encode(data.read()).decode()}]})
    return tfrecord_inference.input_handler(data, context)


def output_handler(response, context):
    return tfrecord_inference.output_handler(response, context)
"""


def job(url: str | list[str], src: Path | str, dst: Path | str, **settings) -> JobSummary:
    urls = url if isinstance(url, list) else [url]
    config = JobConfig(input=str(src), output=str(dst), endpoints=urls, **settings)
    return run_job(config, LogProgress(interval=60))


def line_job(url: str, tmp_path: Path, name: str, text: str, media: str, **settings) -> JobSummary:
    """A job on one input file of lines (`tmp_path/in/<name>`, output in `tmp_path/out`):
    `media` in and out, a record per line and an output line per record."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_text(text)
    return job(
        url,
        tmp_path / "in",
        tmp_path / "out",
        content_type=media,
        accept=media,
        split_type="Line",
        assemble_with="Line",
        **settings,
    )


def outputs(root: Path) -> dict[str, bytes]:
    """Every file under root by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def hp3(tmp_path_factory) -> Iterator[str]:
    """half_plus_three (y = x/2 + 3) behind the whole stack, in batch mode."""
    tmp = tmp_path_factory.mktemp("bt-hp3")
    em.half_plus_three_tf1(tmp / "models" / "half_plus_three", versions=(1,))
    with serve_stack(tmp / "models", tmp, BATCH_ENV) as server:
        yield server.url


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Iterator[str]:
    """The digits CNN (shared, trained once per session) with a code/inference.py."""
    base = em.ensure_built("digits", tmp_path_factory.getbasetemp() / "shared-models" / "digits")
    tmp = tmp_path_factory.mktemp("bt-digits")
    model_dir = tmp / "model"
    (model_dir / "digits").mkdir(parents=True)
    os.symlink(base / "1", model_dir / "digits" / "1")
    (model_dir / "code" / "lib").mkdir(parents=True)
    shutil.copy(TFRECORD_HANDLER, model_dir / "code" / "lib" / "tfrecord_inference.py")
    (model_dir / "code" / "inference.py").write_text(DIGITS_INFERENCE)
    with serve_stack(model_dir, tmp, BATCH_ENV) as server:
        yield server.url


# ----- half_plus_three: formats, order, DataProcessing, failures ---------------------------------


@pytest.mark.parametrize(
    ("settings", "files", "expected"),
    [
        (
            {"content_type": "text/csv", "accept": "text/csv", "split_type": "Line"},
            {"a.csv": b"1.0\n2.0\n\n5.0\n", "sub/b.csv": b"10\n20"},
            {"a.csv.out": b"3.5\n4.0\n5.5\n", "sub/b.csv.out": b"8.0\n13.0\n"},
        ),
        (
            {
                "content_type": "application/jsonlines",
                "accept": "application/jsonlines",
                "split_type": "Line",
                "batch_strategy": "SingleRecord",
            },
            {"x.jsonl": b"1.0\n[2.0]\n"},
            {"x.jsonl.out": b"3.5\n[4.0]\n"},
        ),
        (
            {"content_type": "application/json", "accept": "application/json"},
            {"req.json": b'{"instances": [1.0, 2.0]}', "z/one.json": b"[[4.0]]"},
            {
                "req.json.out": b'{"predictions":[3.5,4.0]}\n',
                "z/one.json.out": b'{"predictions":[[5.0]]}\n',
            },
        ),
    ],
    ids=["csv-line-multirecord", "jsonlines-singlerecord", "json-whole-files"],
)
def test_formats(hp3, tmp_path, settings, files, expected):
    for name, data in files.items():
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_bytes(data)
    summary = job(hp3, tmp_path / "in", tmp_path / "out", assemble_with="Line", **settings)
    assert summary.ok, summary.failures
    got = {k: v.replace(b" ", b"") for k, v in outputs(tmp_path / "out").items()}
    assert got == {k: v.replace(b" ", b"") for k, v in expected.items()}
    assert summary.succeeded == len(files) and summary.failed == 0


def test_order_is_kept_with_concurrent_single_records(hp3, tmp_path):
    values = [float(i) for i in range(300)]
    text = "".join(f"{v}\n" for v in values)
    summary = line_job(
        hp3,
        tmp_path,
        "many.csv",
        text,
        "text/csv",
        batch_strategy="SingleRecord",
        max_concurrent_transforms=8,
    )
    assert summary.ok and summary.requests == 300 and summary.records == 300
    lines = (tmp_path / "out" / "many.csv.out").read_text().splitlines()
    assert [float(x) for x in lines] == [v / 2 + 3 for v in values]


def test_csv_join_with_input_and_output_filters(hp3, tmp_path):
    rows = 'id1,2.0\n"id,2",4.0\n'
    summary = line_job(
        hp3,
        tmp_path,
        "rows.csv",
        rows,
        "text/csv",
        input_filter="$[1:]",
        join_source="Input",
        output_filter="$[0,-1]",
    )
    assert summary.ok, summary.failures
    assert (tmp_path / "out" / "rows.csv.out").read_text() == 'id1,4.0\n"id,2",5.0\n'


def test_json_lines_join_keeps_the_input_object(hp3, tmp_path):
    text = '{"id":"a","x":1.0}\n{"id":"b","x":3.0}\n'
    summary = line_job(
        hp3,
        tmp_path,
        "r.jsonl",
        text,
        "application/jsonlines",
        input_filter="$.x",
        join_source="Input",
    )
    assert summary.ok, summary.failures
    lines = (tmp_path / "out" / "r.jsonl.out").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": "a", "x": 1.0, "SageMakerOutput": 3.5},
        {"id": "b", "x": 3.0, "SageMakerOutput": 4.5},
    ]


def test_failed_inputs_get_no_output_and_a_report(hp3, tmp_path):
    src, dst = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "good.csv").write_text("1.0\n2.0\n")
    (src / "bad.csv").write_text("1.0\nnot-a-number\n3.0\n")
    (src / "huge.csv").write_bytes(b"1.0\n" + b"9" * (1024 * 1024 + 1) + b"\n")
    dst.mkdir()
    (dst / "bad.csv.out").write_text("stale output of an earlier run\n")
    settings = {"content_type": "text/csv", "split_type": "Line", "batch_strategy": "SingleRecord"}
    summary = job(hp3, src, dst, max_payload_in_mb=1, **settings)
    assert (summary.succeeded, summary.failed) == (1, 2)
    assert sorted(outputs(dst)) == sorted([FAILURE_REPORT, "good.csv.out"])
    report = json.loads((dst / FAILURE_REPORT).read_text())
    failed = {f["input"]: f for f in report["failed"]}
    assert failed["bad.csv"]["status"] == 400 and "record 1" in failed["bad.csv"]["error"]
    assert "over MaxPayloadInMB" in failed["huge.csv"]["error"]
    assert report["summary"]["failed"] == 2 and "failure_report" not in report["summary"]
    # fixed and resumed: only the failed inputs run again, and the report goes away
    (src / "bad.csv").write_text("1.0\n3.0\n")
    (src / "huge.csv").write_text("5.0\n")
    again = job(hp3, src, dst, resume=True, **settings)
    assert (again.skipped, again.succeeded, again.failed) == (1, 2, 0)
    assert sorted(outputs(dst)) == ["bad.csv.out", "good.csv.out", "huge.csv.out"]


def _many_files(root: Path, count: int) -> None:
    for i in range(count):
        path = root / f"part-{i // 100}" / f"f{i:04d}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{i}.{j}\n" for j in range(5)))


def test_killed_job_resumes_to_the_same_outputs(hp3, tmp_path):
    src = tmp_path / "in"
    _many_files(src, 600)
    reference = job(
        hp3, src, tmp_path / "ref", content_type="text/csv", split_type="Line", assemble_with="Line"
    )
    assert reference.ok and reference.succeeded == 600
    cli = [sys.executable, "-m", "tfs_batch_transform.main", "--endpoint", hp3]
    cli += ["--input", str(src), "--output", str(tmp_path / "out"), "--content-type", "text/csv"]
    cli += ["--split-type", "Line", "--assemble-with", "Line", "--max-concurrent-transforms", "1"]
    log = open(tmp_path / "killed.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cli, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list((tmp_path / "out").rglob("*.out"))) >= 50:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the job ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    written = len(list((tmp_path / "out").rglob("*.out")))
    assert 50 <= written < 600
    summary_path = tmp_path / "summary.json"
    resumed = subprocess.run(
        [*cli, "--resume", "--summary-json", str(summary_path)], capture_output=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr.decode()[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["skipped"] >= written - 1  # the killed run may have finished one more file
    assert summary["skipped"] + summary["succeeded"] == 600
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")  # no partials, no duplicates


def model_dir_job(tmp_path: Path, inputs: dict[str, str]) -> list[str]:
    """The command of a job that starts its own container on half_plus_three, for CSV lines
    `inputs` (name -> text)."""
    em.half_plus_three_tf1(tmp_path / "models" / "half_plus_three", versions=(1,))
    (tmp_path / "in").mkdir()
    for name, text in inputs.items():
        (tmp_path / "in" / name).write_text(text)
    cli = [sys.executable, "-m", "tfs_batch_transform.main"]
    cli += ["--model-dir", str(tmp_path / "models")]
    cli += ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    cli += ["--content-type", "text/csv", "--accept", "text/csv", "--split-type", "Line"]
    cli += ["--assemble-with", "Line", "--summary-json", str(tmp_path / "s.json"), "--progress=log"]
    return cli


def printed_log(output: str) -> Path | None:
    """The container's log the job names when it starts the container."""
    found = re.search(r"\(log: (\S+)\)", output)
    return Path(found.group(1)) if found else None


def test_model_dir_starts_and_stops_the_container(tmp_path):
    """The container is started for the job and stopped; outputs get the umask's mode (0644
    under 022), as any new file; a job with a failed input keeps the container's log it named
    at the start (and nothing else of its temporary folder)."""
    cli = model_dir_job(tmp_path, {"a.csv": "1.0\n3.0\n", "bad.csv": "1.0\nnope\n"})
    umask = lambda: os.umask(0o022)  # noqa: E731
    result = subprocess.run(cli, capture_output=True, text=True, timeout=180, preexec_fn=umask)
    assert result.returncode == 1, result.stderr[-3000:]  # bad.csv failed
    assert (tmp_path / "out" / "a.csv.out").read_text() == "3.5\n4.5\n"
    assert stat.S_IMODE((tmp_path / "out" / "a.csv.out").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out" / FAILURE_REPORT).stat().st_mode) == 0o644
    summary = json.loads((tmp_path / "s.json").read_text())
    url = summary["parameters"]["endpoints"][0]
    assert summary["parameters"]["sources"]["BatchStrategy"] == "execution-parameters"
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/ping", timeout=2)  # stopped
    assert "progress" in result.stderr or "done:" in result.stderr
    kept = printed_log(result.stderr)
    assert kept is not None, result.stderr[-3000:]
    assert "ready" in kept.read_text()  # the container's log, with its start-up
    assert [p.name for p in kept.parent.iterdir()] == [kept.name]  # its run dir is gone
    shutil.rmtree(kept.parent)


def test_sigterm_stops_the_container_and_removes_its_folder(tmp_path):
    """SIGTERM (as an orchestrator stops a job) unwinds as Ctrl-C does: the container
    stopped, its temporary folder removed, exit 143."""
    cli = model_dir_job(tmp_path, {"a.csv": "1.0\n"})
    output = tmp_path / "job.log"
    log = open(output, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cli, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while (serve_log := printed_log(output.read_text())) is None or not serve_log.exists():
            assert proc.poll() is None and time.monotonic() < deadline, output.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # while the container starts
        assert proc.wait(60) == 143, output.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    assert not serve_log.parent.exists(), list(serve_log.parent.iterdir())


def _invocations(log_text: str) -> int:
    return log_text.count('"POST /invocations ')


def test_two_containers_share_the_inputs(hp3, tmp_path):
    tmp = tmp_path / "second"
    em.half_plus_three_tf1(tmp / "models" / "half_plus_three", versions=(1,))
    _many_files(tmp_path / "in", 40)
    with serve_stack(tmp / "models", tmp, BATCH_ENV) as second:
        before = _invocations(second.log_path.read_text(errors="replace"))
        summary = job(
            [hp3, second.url],
            tmp_path / "in",
            tmp_path / "out",
            content_type="text/csv",
            accept="text/csv",
            split_type="Line",
            assemble_with="Line",
            batch_strategy="SingleRecord",
        )
        time.sleep(1.5)  # nginx flushes its buffered access log every second
        served_by_second = _invocations(second.log_path.read_text(errors="replace")) - before
    assert summary.ok and summary.requests == 200
    assert 0 < served_by_second < 200
    assert summary.parameters["endpoints"] == [hp3, second.url]
    for i in range(40):
        out = (tmp_path / "out" / f"part-0/f{i:04d}.csv.out").read_text().split()
        assert [float(x) for x in out] == [float(f"{i}.{j}") / 2 + 3 for j in range(5)]


# ----- digits: JPEG images one per file, TFRecord files ------------------------------------------


def test_jpeg_images_one_per_file(digits, tmp_path):
    samples = em.digits_test_set()[:30]
    for i, (jpeg, _label) in enumerate(samples):
        (tmp_path / "in" / f"{i % 3}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / f"{i % 3}" / f"img{i:03d}.jpg").write_bytes(jpeg)
    summary = job(
        digits,
        tmp_path / "in",
        tmp_path / "out",
        content_type="application/x-image",
        accept="application/json",
        max_concurrent_transforms=4,
    )
    assert summary.ok and summary.succeeded == 30 and summary.requests == 30
    got = outputs(tmp_path / "out")
    assert len(got) == 30
    correct = 0
    for i, (_jpeg, label) in enumerate(samples):
        # the TFRecord example's output handler: one JSON line per prediction
        prediction = json.loads(got[f"{i % 3}/img{i:03d}.jpg.out"])
        correct += prediction["classes"] == label
    assert correct >= 27


def _tf_example(jpeg: bytes, label: int) -> bytes:
    tf = pytest.importorskip("tensorflow")
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.mark.parametrize("strategy", ["MultiRecord", "SingleRecord"])
def test_tfrecord_files(digits, tmp_path, strategy):
    samples = em.digits_test_set()[: 120 if strategy == "MultiRecord" else 20]
    files = 3 if strategy == "MultiRecord" else 1
    per_file = len(samples) // files
    (tmp_path / "in").mkdir()
    for n in range(files):
        chunk = samples[n * per_file : (n + 1) * per_file]
        data = b"".join(frame_tfrecord(_tf_example(jpeg, label)) for jpeg, label in chunk)
        (tmp_path / "in" / f"digits-{n}.tfrecord").write_bytes(data)
    summary = job(
        digits,
        tmp_path / "in",
        tmp_path / "out",
        content_type="application/x-tfexample",
        accept="application/jsonlines",
        split_type="TFRecord",
        batch_strategy=strategy,
        assemble_with="Line",
    )
    assert summary.ok, summary.failures
    assert summary.requests == (files if strategy == "MultiRecord" else len(samples))
    correct = 0
    for n in range(files):
        lines = (tmp_path / "out" / f"digits-{n}.tfrecord.out").read_text().splitlines()
        labels = [label for _, label in samples[n * per_file : (n + 1) * per_file]]
        assert len(lines) == len(labels)  # one line per record, in order
        correct += sum(
            json.loads(line)["classes"] == y for line, y in zip(lines, labels, strict=True)
        )
    assert correct / len(samples) >= 0.95


def test_corrupt_tfrecord_file_fails_alone(digits, tmp_path):
    jpeg, label = em.digits_test_set()[0]
    good = frame_tfrecord(_tf_example(jpeg, label))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "good.tfrecord").write_bytes(good)
    (tmp_path / "in" / "corrupt.tfrecord").write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    summary = job(
        digits,
        tmp_path / "in",
        tmp_path / "out",
        content_type="application/x-tfexample",
        split_type="TFRecord",
        batch_strategy="MultiRecord",
    )
    assert [f.input for f in summary.failures] == ["corrupt.tfrecord"]
    assert "data CRC mismatch" in summary.failures[0].error
    assert summary.requests == 1  # the corrupt file was never sent


# ----- retries: a real HTTP server that fails the first attempts --------------------------------


class _Flaky(http.server.BaseHTTPRequestHandler):
    failures_left: dict[str, int] = {}

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(200 if self.path == "/ping" else 404, b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = body.decode()
        if key.startswith("client-error"):
            self._reply(422, b'{"error": "bad record"}')
        elif self.failures_left.get(key, 0) > 0:
            self.failures_left[key] -= 1
            self._reply(503, b'{"error": "busy"}')
        else:
            self._reply(200, body.upper())


@pytest.fixture()
def flaky() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_5xx_is_retried_and_4xx_fails_the_file(flaky, tmp_path, monkeypatch):
    monkeypatch.setattr("tfs_batch_transform.client.BACKOFF_FACTOR", 0.01)
    monkeypatch.setattr("tfs_batch_transform.client.BACKOFF_JITTER", 0.0)
    _Flaky.failures_left.update({"twice": 2, "always": 10})
    (tmp_path / "in").mkdir()
    for name in ("twice", "always", "client-error", "fine"):
        (tmp_path / "in" / name).write_text(name)
    summary = job(flaky, tmp_path / "in", tmp_path / "out", max_retries=3)
    assert outputs(tmp_path / "out").keys() == {"twice.out", "fine.out", FAILURE_REPORT}
    assert (tmp_path / "out" / "twice.out").read_text() == "TWICE"
    failed = {f.input: f for f in summary.failures}
    assert failed["always"].status == 503 and "after 4 attempts" in failed["always"].error
    assert failed["client-error"].status == 422
    # twice: 3 requests, always: 4, client-error: 1 (no retry), fine: 1
    assert (summary.requests, summary.retries) == (9, 5)
    assert summary.parameters["sources"]["MaxConcurrentTransforms"] == "default"


# ----- S3 through moto's server -------------------------------------------------------------------


def test_s3_input_and_output(hp3, s3_url, monkeypatch):
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    s3 = boto3.client("s3", endpoint_url=s3_url)
    s3.create_bucket(Bucket="data")
    keys = {
        "in/b.csv": b"2.0\n",
        "in/a/x.csv": b"1.0\n3.0\n",
        "in/a/": b"",
        "in-other/c.csv": b"9\n",
    }
    for key, body in keys.items():
        s3.put_object(Bucket="data", Key=key, Body=body)
    settings = {"content_type": "text/csv", "accept": "text/csv", "split_type": "Line"}
    settings["assemble_with"] = "Line"
    summary = job(hp3, "s3://data/in/", "s3://data/out", s3_endpoint_url=s3_url, **settings)
    assert summary.ok and summary.files == 2
    listed = s3.list_objects_v2(Bucket="data", Prefix="out/")["Contents"]
    assert [o["Key"] for o in listed] == ["out/a/x.csv.out", "out/b.csv.out"]
    body = s3.get_object(Bucket="data", Key="out/a/x.csv.out")["Body"].read()
    assert body == b"3.5\n4.5\n"
    # AWS_ENDPOINT_URL instead of the flag; resume skips both
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_url)
    again = job(hp3, "s3://data/in/", "s3://data/out", resume=True, **settings)
    assert (again.skipped, again.requests) == (2, 0)


def test_batching_in_batch_transform_splits_multirecord_requests(tmp_path):
    """A MultiRecord request far over SAGEMAKER_TFS_MAX_BATCH_SIZE is split, not refused."""
    models = tmp_path / "models"
    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    env = {
        **BATCH_ENV,
        "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
        "SAGEMAKER_TFS_MAX_BATCH_SIZE": "4",
    }
    with serve_stack(models, tmp_path, env) as server:
        lines = "".join(f"{x}\n" for x in range(50))
        reply = requests.post(
            f"{server.url}/invocations",
            data=lines,
            headers={"Content-Type": "text/csv", "Accept": "text/csv"},
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        assert [float(v) for v in reply.text.split()] == [0.5 * x + 3 for x in range(50)]
