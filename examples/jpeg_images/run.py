"""JPEG images through an image classifier with an inference.py, end to end on this machine.

    .venv/bin/python examples/jpeg_images/run.py [--model digits|resnet50] [--port 8080]

Builds the model (cached in run/examples/models/), lays out a SageMaker model directory
(<model>/1/ + code/inference.py), writes the bundled test images, starts the container stack
(`serve`) on loopback, POSTs every image to /invocations as application/x-image and prints one
prediction per image. For digits it prints the accuracy and fails below 95 %; it fails when
any request fails. See README.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "test" / "support"))  # example_models
from _local_endpoint import CACHE, assemble_model_dir, cached_model, local_endpoint  # noqa: E402

MODELS = ("digits", "resnet50")
MIN_ACCURACY = 0.95
# scikit-image's bundled sample photos: real pictures, available offline.
SAMPLE_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")


def write_images(model: str, dest: Path) -> list[tuple[Path, int | None]]:
    """Write the test images for `model` to `dest`; (path, true label or None) for each."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    images: list[tuple[Path, int | None]] = []
    if model == "digits":
        from example_models import digits_test_set

        for i, (jpeg, label) in enumerate(digits_test_set()):
            path = dest / f"digit-{i:03d}-label-{label}.jpg"
            path.write_bytes(jpeg)
            images.append((path, label))
    else:
        from PIL import Image
        from skimage import data

        for name in SAMPLE_PHOTOS:
            path = dest / f"{name}.jpg"
            Image.fromarray(getattr(data, name)()).convert("RGB").save(path, quality=95)
            images.append((path, None))
    return images


def classify(url: str, images: list[tuple[Path, int | None]]) -> tuple[int, int, int]:
    """POST each image; print its prediction. Returns (correct, labelled, failed)."""
    correct = labelled = failed = 0
    started = time.monotonic()
    with requests.Session() as session:
        for path, label in images:
            reply = session.post(
                f"{url}/invocations",
                data=path.read_bytes(),
                headers={"Content-Type": "application/x-image", "Accept": "application/json"},
                timeout=120,
            )
            if reply.status_code != 200:
                failed += 1
                print(f"{path.name:<28} FAILED {reply.status_code}: {reply.text[:300]}")
                continue
            (prediction,) = reply.json()["predictions"]
            predicted = prediction["classes"]
            probability = prediction["probabilities"][predicted]
            line = f"{path.name:<28} class {predicted:>4}  p={probability:.3f}"
            if label is not None:
                labelled += 1
                correct += predicted == label
                line += "  ok" if predicted == label else f"  WRONG (label {label})"
            print(line)
    elapsed = time.monotonic() - started
    print(f"{len(images)} requests in {elapsed:.1f} s ({1000 * elapsed / len(images):.1f} ms each)")
    return correct, labelled, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, default="digits", help="default: digits")
    parser.add_argument(
        "--port", type=int, default=8080, help="front door port (default 8080; 0: any free)"
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached model")
    args = parser.parse_args(argv)

    work = CACHE / "jpeg_images" / args.model
    images = write_images(args.model, work / "images")
    print(f"wrote {len(images)} test images to {work / 'images'}")
    model_base = cached_model(args.model, rebuild=args.rebuild)
    model_dir = assemble_model_dir(work / "model", args.model, model_base, HERE / "code")
    with local_endpoint(model_dir, args.port) as url:
        correct, labelled, failed = classify(url, images)

    status = 0
    if failed:
        print(f"{failed} of {len(images)} requests failed")
        status = 1
    if labelled:
        accuracy = correct / labelled
        print(f"accuracy: {correct}/{labelled} = {accuracy:.2%} (required: {MIN_ACCURACY:.0%})")
        if accuracy < MIN_ACCURACY:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
