"""Cold start of the image under Serverless Inference's profile (test/image/serverless.py): from
`docker run` to the first /ping 200 and to the first answered /invocations, for half_plus_three
(JSON) and the classic JPEG inference.py on the digits CNN, and where the time goes (the
moments the container's log names: serve's first line, the model loaded, serve ready).

    scripts/engine.sh exec .venv/bin/python test/perf/bench_cold_start.py [--runs 3]

Writes perf-results/cold-start.json. Times are this machine's; the medians of the runs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (REPO / "test" / "image", REPO / "test" / "support", REPO / "examples", HERE):
    sys.path.insert(0, str(path))

import requests  # noqa: E402
from containers import Container, default_image  # noqa: E402
from serverless import ENV, OPTIONS  # noqa: E402

JPEG_CODE = REPO / "examples" / "jpeg_images" / "code"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})")
MOMENTS = {  # a moment -> what the first log line at it says
    "serve_first_line": " serve [",
    "service_worker_up": "Started server process",
    "model_loaded": "Successfully loaded servable",
    "model_server_up": "Exporting HTTP/REST API",
    "serve_ready": ": ready: http",
}


def models(work: Path) -> dict[str, tuple[Path, bytes, str]]:
    """kind -> (model dir, the first request's body, its content type)."""
    from _local_endpoint import assemble_model_dir, cached_model
    from bench_images import _jpeg_example

    import example_models as em

    em.half_plus_three_tf1(work / "plain" / "half_plus_three", versions=(1,))
    jpeg_dir = assemble_model_dir(work / "jpeg", "digits", cached_model("digits"), JPEG_CODE)
    (image, _), *_ = _jpeg_example().write_images("digits", work / "images")
    return {
        "half_plus_three": (work / "plain", b'{"instances": [1.0, 2.0]}', "application/json"),
        "jpeg_digits": (jpeg_dir, image.read_bytes(), "application/x-image"),
    }


def moments(logs: str, started: float) -> dict[str, float]:
    """Seconds from `started` (time.time()) to each moment the log shows."""
    found: dict[str, float] = {}
    for line in logs.splitlines():
        match = STAMP.match(line)
        if not match:
            continue
        for name, text in MOMENTS.items():
            if name not in found and text in line:
                when = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").timestamp()
                found[name] = round(when + int(match[2]) / 1000 - started, 3)
    return found


def cold_start(engine, image: str, model_dir: Path, body: bytes, content_type: str) -> dict:
    started_wall, started = time.time(), time.monotonic()
    container = Container(engine, image, model_dir, env=ENV, **OPTIONS)
    try:
        ping = None
        while ping is None:
            if time.monotonic() - started > 180:
                raise SystemExit(f"no /ping 200 within 180 s:\n{container.logs()[-3000:]}")
            try:
                if requests.get(f"{container.url}/ping", timeout=2).status_code == 200:
                    ping = time.monotonic() - started
            except requests.RequestException:
                time.sleep(0.02)
        reply = requests.post(
            f"{container.url}/invocations",
            data=body,
            headers={"Content-Type": content_type},
            timeout=60,
        )
        invoked = time.monotonic() - started
        if reply.status_code != 200:
            raise SystemExit(f"first invocation: {reply.status_code} {reply.text[:300]}")
        return {
            "to_ping_200": round(ping, 3),
            "to_first_invocation": round(invoked, 3),
            **moments(container.logs(), started_wall),
        }
    finally:
        container.remove()


def main() -> None:
    import docker

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=REPO / "perf-results" / "cold-start.json")
    args = parser.parse_args()
    engine = docker.from_env(timeout=300)
    image = default_image()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (model_dir, body, content_type) in models(Path(tmp)).items():
            runs = [
                cold_start(engine, image, model_dir, body, content_type) for _ in range(args.runs)
            ]
            keys = runs[0].keys()
            results[kind] = {
                "median_seconds": {
                    k: round(statistics.median(r[k] for r in runs), 3) for k in keys
                },
                "runs": runs,
            }
            print(kind, json.dumps(results[kind]["median_seconds"]), flush=True)
    labels = engine.images.get(image).labels or {}
    report = {
        "image": image,
        "model_server": labels.get("com.amazonaws.sagemaker.tfs.model-server"),
        "profile": {"env": ENV, "options": OPTIONS},
        "results": results,
    }
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
