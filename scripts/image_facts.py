"""The image's facts, measured: sizes, layers, start to the first /ping 200, idle memory, and
(with --build) how long `make image` takes cold and warm. Prints a Markdown table and writes
JSON (perf-results/image_facts.json).

    scripts/engine.sh exec .venv/bin/python scripts/image_facts.py [--image REF] [--build]

  size            the image as the engine stores it (uncompressed), and as a registry stores it:
                  every layer gzipped, as `docker push` sends it (the script gzips `docker save`)
  layers          the layer count, and each layer's size with the step that made it
  start           `docker run` to the first GET /ping 200 (half_plus_three; then with a
                  code/inference.py, which adds the Python service), several runs
  idle memory     once ready, untouched: the proportional set size (PSS) of every process in
                  the container added up (shared pages counted once), and RSS per process
  --build         cold: scripts/build.sh in an empty podman storage (nothing cached: no base,
                  no layers, no pip downloads), deleted afterwards; warm: the same build again
                  in the engine's own storage (every layer cached), and warm after a change to
                  our code (a copy of the repository with one source file touched)
Timing figures depend on the machine and its load; they are what this run measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import docker
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "support"))  # example_models
sys.path.insert(0, str(REPO / "test" / "image"))  # containers, user_code
import user_code  # noqa: E402
from containers import Container, default_image, readable  # noqa: E402

CHUNK = 1 << 20
RUNS = 3


def gzipped_size(stream: Any) -> int:
    """Bytes of `stream` (a file object) once gzipped at zlib's default level, as pushes do."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    total = 0
    while chunk := stream.read(CHUNK):
        total += len(compressor.compress(chunk))
    return total + len(compressor.flush())


def compressed_sizes(engine: docker.DockerClient, image: str) -> list[int]:
    """Each layer tar of `docker save IMAGE` gzipped, bottom layer first."""
    with tempfile.TemporaryFile() as archive:
        for chunk in engine.images.get(image).save(chunk_size=CHUNK):
            archive.write(chunk)
        archive.seek(0)
        sizes = []
        with tarfile.open(fileobj=archive) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            for layer in manifest[0]["Layers"]:
                member = tar.extractfile(layer)
                assert member is not None, layer
                sizes.append(gzipped_size(member))
    return sizes


def layers(engine: docker.DockerClient, image: str) -> list[dict[str, Any]]:
    history = engine.api.history(image)
    return [
        {"size": item["Size"], "created_by": " ".join(item["CreatedBy"].split())[:160]}
        for item in reversed(history)
        if item["Size"] > 0
    ]


MEMORY = """
import collections, glob, json, re
pss, rss = 0, collections.Counter()
for status in glob.glob("/proc/[0-9]*/status"):
    folder = status.rsplit("/", 1)[0]
    try:
        text, rollup = open(status).read(), open(folder + "/smaps_rollup").read()
    except OSError:  # gone, or this very process
        continue
    name = re.search(r"Name:\\s+(\\S+)", text).group(1)
    rss[name] += int(re.search(r"VmRSS:\\s+(\\d+) kB", text).group(1)) * 1024
    pss += int(re.search(r"^Pss:\\s+(\\d+) kB", rollup, re.M).group(1)) * 1024
print(json.dumps({"pss_bytes": pss, "rss_bytes_by_process": dict(rss)}))
"""


def idle_memory(container: Container) -> dict[str, Any]:
    """PSS of every process (shared pages counted once: the truth for the total), and RSS
    per process name (shared pages in each)."""
    code, output = container.exec("python3", "-c", MEMORY)
    assert code == 0, output
    return json.loads(output.strip().splitlines()[-1])


def start_runs(engine: docker.DockerClient, image: str, model_dir: Path) -> dict[str, Any]:
    """Seconds from `docker run` to the first /ping 200, and idle memory after the last run."""
    seconds: list[float] = []
    memory: dict[str, int] = {}
    for run in range(RUNS):
        started = time.monotonic()
        container = Container(engine, image, model_dir)
        try:
            deadline = started + 300
            while True:
                with contextlib.suppress(requests.RequestException):
                    if requests.get(f"{container.url}/ping", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline or not container.running():
                    raise SystemExit(f"no /ping 200:\n{container.logs()[-3000:]}")
                time.sleep(0.05)
            seconds.append(round(time.monotonic() - started, 2))
            if run == RUNS - 1:
                time.sleep(5)  # idle: nothing asked of it since it was ready
                memory = idle_memory(container)
            container.stop()
        finally:
            container.remove()
    return {"seconds": seconds, "median_seconds": statistics.median(seconds), **memory}


def timed_build(env: dict[str, str], cwd: Path) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [str(cwd / "scripts" / "build.sh")], env=env, cwd=cwd, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SystemExit(f"build failed:\n{result.stderr[-5000:]}")
    return round(time.monotonic() - started, 1)


def build_times() -> dict[str, float]:
    """Cold in a throwaway podman storage; warm in the engine's own; warm after a code change."""
    env = dict(os.environ)
    if env.get("ENGINE") != "podman":
        raise SystemExit("--build measures cold builds with podman only (a throwaway storage)")
    times: dict[str, float] = {}
    scratch = Path(tempfile.mkdtemp(prefix="image-facts-", dir="/var/tmp"))
    try:
        storage = scratch / "storage.conf"
        storage.write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{scratch / "graph"}"\n'
            f'runroot = "{scratch / "run"}"\n'
        )
        (scratch / "tmp").mkdir()
        cold = {
            **env,
            "DOCKER": "podman",  # the CLI on the throwaway storage, not the API service
            "CONTAINERS_STORAGE_CONF": str(storage),
            "TMPDIR": str(scratch / "tmp"),
            "DEBIAN_IMAGE": "",
        }
        times["cold_seconds"] = timed_build(cold, REPO)
    finally:
        subprocess.run(
            ["podman", "unshare", "rm", "-rf", str(scratch)], capture_output=True, check=False
        )
        shutil.rmtree(scratch, ignore_errors=True)
    times["warm_seconds"] = timed_build(env, REPO)
    with tempfile.TemporaryDirectory(prefix="image-facts-repo-") as copy:
        files = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name in files:
            if (REPO / name).is_file():
                (Path(copy) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, Path(copy) / name)
        touched = Path(copy) / "container" / "sagemaker_serving" / "__init__.py"
        touched.write_text(touched.read_text() + "\n# image_facts.py: a code change\n")
        env_copy = {**env, "IMAGE_REPO": "image-facts-code-change"}
        tag = default_image().rsplit(":", 1)[1]
        times["warm_after_code_change_seconds"] = timed_build(env_copy, Path(copy))
    subprocess.run(
        [env.get("ENGINE", "podman"), "rmi", "image-facts-code-change:" + tag],
        capture_output=True,
        check=False,
    )
    return times


def record(engine: docker.DockerClient, image: str) -> dict[str, str]:
    """What the image says it holds (docker/finish_image.sh's record)."""
    output = engine.containers.run(
        image,
        ["bash", "-c", "cd /opt/sagemaker-tfs && head -c 100000 *.txt"],
        remove=True,
    ).decode()
    wanted = ("nginx=", "libnginx-mod-http-js=", "python3=", "tensorflow==", "numpy==")
    versions = {line.split("=")[0]: line for line in output.splitlines() if line.startswith(wanted)}
    return versions


def markdown(facts: dict[str, Any]) -> str:
    mb = 1e6
    rows = [
        ("image", f"`{facts['image']}` ({facts['model_server']})"),
        ("size, uncompressed", f"{facts['size_bytes'] / mb:,.0f} MB"),
        ("size, compressed (gzip, as pushed)", f"{facts['compressed_bytes'] / mb:,.0f} MB"),
        ("layers", str(facts["layer_count"])),
    ]
    for label, key in (("fast path", "start_fast_path"), ("with inference.py", "start_user_code")):
        start = facts[key]
        rows.append(
            (
                f"docker run to first /ping 200, {label}",
                f"{start['median_seconds']:.1f} s (runs: {', '.join(map(str, start['seconds']))})",
            )
        )
        by_process = ", ".join(
            f"{name} {size / mb:,.0f}"
            for name, size in sorted(start["rss_bytes_by_process"].items())
        )
        rows.append(
            (
                f"idle memory, {label}",
                f"{start['pss_bytes'] / mb:,.0f} MB (PSS of all processes; RSS MB: {by_process})",
            )
        )
    for key, label in (
        ("cold_seconds", "build, cold (nothing cached)"),
        ("warm_seconds", "build, warm (all cached)"),
        ("warm_after_code_change_seconds", "build, warm after a code change"),
    ):
        if key in facts.get("build", {}):
            rows.append((label, f"{facts['build'][key]:.0f} s"))
    table = "| fact | measured |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    layer_rows = "".join(
        f"| {layer['size'] / mb:,.1f} MB | {layer.get('compressed', 0) / mb:,.1f} MB "
        f"| `{layer['created_by'][:90]}` |\n"
        for layer in facts["layers"]
    )
    header = "\n| layer | gzipped | made by |\n|---|---|---|\n"
    return table + header + layer_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", help="default: scripts/build.sh's cpu tag")
    parser.add_argument("--build", action="store_true", help="also time cold and warm builds")
    parser.add_argument("--out", type=Path, default=REPO / "perf-results" / "image_facts.json")
    args = parser.parse_args(argv)
    engine = docker.from_env(timeout=600)
    image = args.image or default_image()
    facts: dict[str, Any] = {"image": image}
    if args.build:
        facts["build"] = build_times()
    attrs = engine.images.get(image).attrs
    facts["model_server"] = attrs["Config"]["Labels"]["com.amazonaws.sagemaker.tfs.model-server"]
    facts["size_bytes"] = attrs["Size"]
    facts["layer_count"] = len(attrs["RootFS"]["Layers"])
    facts["layers"] = layers(engine, image)
    compressed = compressed_sizes(engine, image)
    facts["compressed_bytes"] = sum(compressed)
    if len(compressed) == len(facts["layers"]):
        for layer, size in zip(facts["layers"], compressed, strict=True):
            layer["compressed"] = size
    facts["versions"] = record(engine, image)
    with tempfile.TemporaryDirectory(prefix="image-facts-") as work:
        fast = readable(user_code.half_plus_three(Path(work) / "fast"))
        coded = readable(user_code.with_code_and_lib(Path(work) / "coded"))
        facts["start_fast_path"] = start_runs(engine, image, fast)
        facts["start_user_code"] = start_runs(engine, image, coded)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(facts, indent=2) + "\n")
    print(markdown(facts))
    print(f"\n(written to {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
