"""scripts/classic_image_jobs.py: the data it builds, the checks it makes, and a small run of
both classic jobs through real containers (digits CNN), with a SIGKILLed and resumed job."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from repo_scripts import load_script

cij = load_script("classic_image_jobs")


def _prediction(cls: int, probs: list[float]) -> dict:
    return {"probabilities": probs, "classes": cls}


def test_builds_the_same_images_as_jpeg_files_and_tfrecord_examples(tmp_path: Path) -> None:
    import tensorflow as tf
    from PIL import Image

    data = cij.build_dataset(tmp_path / "a", n=7, records_per_file=3, seed=5)
    assert data.names == sorted(data.names) == sorted(p.name for p in data.jpeg_dir.iterdir())
    assert data.files == [("part-00000.tfrecord", 3), ("part-00001.tfrecord", 3),
                          ("part-00002.tfrecord", 1)]  # fmt: skip
    records = [
        tf.train.Example.FromString(r.numpy())
        for name, _ in data.files
        for r in tf.data.TFRecordDataset(str(data.tfrecord_dir / name))  # checks the CRCs
    ]
    assert len(records) == 7
    for name, example in zip(data.names, records, strict=True):
        feature = example.features.feature
        assert feature["image/encoded"].bytes_list.value == [(data.jpeg_dir / name).read_bytes()]
        assert feature["image/filename"].bytes_list.value == [name.encode()]
        image = Image.open(io.BytesIO(feature["image/encoded"].bytes_list.value[0]))
        assert image.format == "JPEG" and image.mode == "RGB"
        assert all(cij.MIN_SIDE <= side <= cij.MAX_SIDE for side in image.size)
    again = cij.build_dataset(tmp_path / "b", n=7, records_per_file=3, seed=5)
    other = cij.build_dataset(tmp_path / "c", n=7, records_per_file=3, seed=6)
    assert [again.jpeg_bytes(i) for i in range(7)] == [data.jpeg_bytes(i) for i in range(7)]
    assert [other.jpeg_bytes(i) for i in range(7)] != [data.jpeg_bytes(i) for i in range(7)]
    assert len({data.jpeg_bytes(i) for i in range(7)}) == 7


def test_checks_catch_missing_extra_reordered_and_stray_outputs(tmp_path: Path) -> None:
    data = cij.build_dataset(tmp_path / "data", n=4, records_per_file=2)
    preds = [_prediction(i % 2, [0.1 * i, 1 - 0.1 * i]) for i in range(4)]
    jpeg_out, tfr_out = tmp_path / "jpeg", tmp_path / "tfr"
    jpeg_out.mkdir()
    tfr_out.mkdir()
    for name, pred in zip(data.names, preds, strict=True):
        (jpeg_out / f"{name}.out").write_text(json.dumps({"predictions": [pred]}))

    def write_tfr(lines_per_file: list[list[dict]]) -> None:
        for (name, _), lines in zip(data.files, lines_per_file, strict=True):
            (tfr_out / f"{name}.out").write_text("".join(json.dumps(p) + "\n" for p in lines))

    write_tfr([preds[:2], preds[2:]])
    jpeg, problems = cij.read_outputs("jpeg", jpeg_out, data)
    tfr, tfr_problems = cij.read_outputs("tfrecord", tfr_out, data)
    assert problems == tfr_problems == []
    assert cij.disagreements(jpeg, tfr, data.names, "x") == []

    write_tfr([[preds[1], preds[0]], preds[2:]])  # two records' lines swapped
    swapped, _ = cij.read_outputs("tfrecord", tfr_out, data)
    assert cij.disagreements(jpeg, swapped, data.names, "x") == [
        f"x: 2 images differ: {data.names[0]}, {data.names[1]}"
    ]
    write_tfr([preds[:2], [*preds[2:], preds[3]]])  # a duplicated line
    assert cij.read_outputs("tfrecord", tfr_out, data)[1] == [
        "part-00001.tfrecord: 3 lines (or empty ones) for 2 records"
    ]
    (jpeg_out / f"{data.names[3]}.out").unlink()
    (jpeg_out / ".img.out.x.tbt-partial").write_text("")
    assert cij.read_outputs("jpeg", jpeg_out, data)[1] == [
        f"{data.names[3]}: no output",
        "unexpected file .img.out.x.tbt-partial",
    ]


def test_agree_allows_only_float_noise_and_ties() -> None:
    a = _prediction(0, [0.5, 0.3, 0.2])
    assert cij.agree(a, _prediction(0, [0.50001, 0.29999, 0.2]))
    assert not cij.agree(a, _prediction(0, [0.51, 0.29, 0.2]))
    assert not cij.agree(a, _prediction(1, [0.5, 0.3, 0.2]))
    assert cij.agree(_prediction(0, [0.4, 0.4, 0.2]), _prediction(1, [0.4, 0.4, 0.2]))
    assert not cij.agree(a, {})


@pytest.mark.slow
def test_both_jobs_one_output_per_image_in_order_and_kill_resume(
    tmp_path: Path, digits_model: Path
) -> None:
    code = cij.main(
        ["--n", "40", "--records-per-file", "10", "--model", "digits", "--model-base",
         str(digits_model), "--kill-and-resume", "--reference", "40", "--output", str(tmp_path),
         "--job-timeout", "120", "--startup-timeout", "120"]
    )  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["problems"] == []
    assert code == 0
    jpeg, tfr = report["jobs"]["jpeg"], report["jobs"]["tfrecord"]
    assert (jpeg["succeeded"], jpeg["records"], jpeg["requests"]) == (40, 40, 40)
    assert (tfr["succeeded"], tfr["records"], tfr["requests"]) == (4, 40, 4)
    assert report["reference_images"] == 40
    for job, inputs in ((jpeg, 40), (tfr, 4)):
        kill = job["kill_and_resume"]
        assert 0 < kill["outputs_at_kill"] < inputs
        assert kill["resume_skipped"] == kill["outputs_at_kill"]
        assert kill["resume_succeeded"] == inputs - kill["outputs_at_kill"]
        assert kill["outputs"] == inputs
