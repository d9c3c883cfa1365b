"""The classic JPEG Batch Transform job (one image per file and request, through the classic
`inference.py`, on the digits CNN) by `tfs-batch-transform --endpoint` against the image:
byte for byte what the same job writes against the native stack."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

from containers import running

from repo_scripts import load_script

MODEL = "digits"
IMAGES = 40


def run_job(args: list[str]) -> None:
    runner = str(Path(sys.executable).parent / "tfs-batch-transform")
    result = subprocess.run([runner, *args], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_jpeg_job_against_the_container_matches_the_native_run(
    engine, image, tmp_path, digits_model
):
    cij = load_script("classic_image_jobs")
    dataset = cij.build_dataset(tmp_path / "data", n=IMAGES, records_per_file=IMAGES)
    jobs = {
        job.kind: job for job in cij.make_jobs(dataset, MODEL, tmp_path, model_base=digits_model)
    }
    job = jobs["jpeg"]
    env = {"SAGEMAKER_BATCH": "true", "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL}

    native = tmp_path / "out-native"
    endpoint_args = job.cli_args("URL", native)
    native_args = ["--model-dir", str(job.model_dir)] + [
        f"--env={key}={value}" for key, value in env.items()
    ]
    at = endpoint_args.index("--endpoint")
    run_job(native_args + endpoint_args[:at] + endpoint_args[at + 2 :])

    in_container = tmp_path / "out-container"
    with running(engine, image, job.model_dir, env=env) as container:
        run_job(job.cli_args(container.url, in_container))
        assert container.stop() == 0

    names = sorted(p.name for p in native.iterdir())
    assert names == sorted(f"{name}.out" for name in dataset.names)
    assert sorted(p.name for p in in_container.iterdir()) == names
    match, mismatch, errors = filecmp.cmpfiles(native, in_container, names, shallow=False)
    assert (mismatch, errors) == ([], []), mismatch[:5]
    assert len(match) == IMAGES
    predictions, problems = cij.read_outputs("jpeg", in_container, dataset)
    assert problems == [] and len(predictions) == IMAGES
