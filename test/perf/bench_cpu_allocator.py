"""TensorFlow's CPU allocator settings: memory kept after an unload against inference speed.

With oneDNN on (TF's default on x86 CPUs with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX),
TF's CPU allocator is `MklCPUAllocator`: allocations of 4 KiB and more go to a BFC pool that
grows and never gives its regions back. Each setting runs in its own process (TF reads these
variables once), the settings interleaved over several rounds, in this one run:

- onednn:        TF_ENABLE_ONEDNN_OPTS=1 (the pool; TensorFlow's default there)
- onednn+system: TF_ENABLE_ONEDNN_OPTS=1, TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1 (malloc, no pool:
                 what serve gives multi-model model servers)
- eigen:         TF_ENABLE_ONEDNN_OPTS=0 (TF's plain CPU allocator and Eigen kernels)
- system+mmap4M: onednn+system with MALLOC_MMAP_THRESHOLD_=4 MiB (glibc maps every block of
                 4 MiB or more on its own, so none stays in an arena after a free)
- system+heap:   onednn+system with MALLOC_MMAP_MAX_=0 and a 4 GiB MALLOC_TRIM_THRESHOLD_
                 (glibc never maps nor trims on its own; malloc_trim at unload still does)

Per setting: RSS before, with 20 models of 20 MB loaded and after unloading them (Servables
in one process, as in the model server, malloc_trim after the unload), and per request of
half_plus_three, the conv tower, the digits CNN and ResNet-50 (random weights), called
in-process: CPU ms (process time, all threads), wall ms, system CPU ms and minor page faults.
Prints medians over the rounds and CPU ratios to `onednn`; writes
perf-results/cpu_allocator.json.

    .venv/bin/python test/perf/bench_cpu_allocator.py [--rounds 3] [--seconds 4] [--no-resnet]
        [--settings onednn onednn+system] [--cases "resnet50 b16" ...] [--models DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from loadgen import bench_arguments, write_report

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SETTINGS = {
    "onednn": {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0"},
    "onednn+system": {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"},
    "eigen": {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0"},
    "system+mmap4M": {
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
        "MALLOC_MMAP_THRESHOLD_": str(4 << 20),
    },
    "system+heap": {
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
        "MALLOC_MMAP_MAX_": "0",
        "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
    },
}
HEAVY_MODELS = 20


def build(root: Path, resnet: bool) -> None:
    """The benchmark's SavedModels under root (skipped when already there)."""
    import example_models as em

    if (root / "done").exists():
        return
    em.half_plus_three_tf1(root / "hp3", versions=(1,))
    em.conv_model(root / "conv")
    em.digits_classifier(root / "digits")
    if resnet:
        em.resnet50_classifier(root / "resnet50")
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(tf.random.uniform([5_000_000], seed=1))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(x):
        return {"y": x + tf.reduce_sum(module.w[:4])}

    tf.saved_model.save(module, str(root / "h0" / "1"), signatures={"serving_default": serve})
    for i in range(1, HEAVY_MODELS):
        shutil.copytree(root / "h0", root / f"h{i}")
    (root / "done").touch()


def child(root: Path, seconds: float, only: list[str] | None) -> dict:
    """Measure memory and speed under this process's environment."""
    import numpy as np
    import psutil

    import example_models as em
    from tfs_model_server.core.manager import release_memory
    from tfs_model_server.core.servable import Servable

    def rss() -> int:
        release_memory()
        return psutil.Process().memory_info().rss >> 20

    hp3 = np.array([1.0, 2.0, 5.0], np.float32)
    digits = [jpeg for jpeg, _ in em.digits_test_set()]
    cases = {
        "hp3 x3": ("hp3", {"x": hp3}),
        "conv b1": ("conv", {"image": em.conv_example_batch(1)}),
        "conv b16": ("conv", {"image": em.conv_example_batch(16)}),
        "digits b1": ("digits", {"image_bytes": np.array(digits[:1], object)}),
        "digits b32": ("digits", {"image_bytes": np.array(digits[:32], object)}),
        "digits b512": ("digits", {"image_bytes": np.array((digits * 2)[:512], object)}),
    }
    if (root / "resnet50").exists():
        photo = em.render_digit_jpeg(np.arange(64).reshape(8, 8) % 16, 224)
        cases["resnet50 b1"] = ("resnet50", {"image_bytes": np.array([photo], object)})
        cases["resnet50 b8"] = ("resnet50", {"image_bytes": np.array([photo] * 8, object)})
        cases["resnet50 b16"] = ("resnet50", {"image_bytes": np.array([photo] * 16, object)})
    cases = {label: case for label, case in cases.items() if not only or label in only}

    servables = {}
    result: dict = {"cpu_ms": {}, "wall_ms": {}, "sys_ms": {}, "faults": {}}
    for label, (model, inputs) in cases.items():
        servable = servables.get(model) or Servable(model, 1, root / model / "1")
        servables[model] = servable
        sig = servable.signature("serving_default")
        outputs = list(sig.outputs)
        for _ in range(3):
            servable.run(sig, inputs, outputs)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        count, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() < wall0 + seconds:
            servable.run(sig, inputs, outputs)
            count += 1
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_ms"][label] = (time.process_time() - cpu0) * 1000 / count
        result["wall_ms"][label] = (time.perf_counter() - wall0) * 1000 / count
        result["sys_ms"][label] = (usage.ru_stime - usage0.ru_stime) * 1000 / count
        result["faults"][label] = (usage.ru_minflt - usage0.ru_minflt) / count
    for servable in servables.values():
        servable.close()
    servables.clear()
    gc.collect()

    before = rss()
    loaded = [Servable(f"h{i}", 1, root / f"h{i}" / "1") for i in range(HEAVY_MODELS)]
    peak = rss()
    for servable in loaded:
        servable.close()
    loaded.clear()
    result["rss_mib"] = {"before": before, "loaded": peak, "unloaded": rss()}
    return result


def main() -> None:
    parser = bench_arguments(__doc__.split("\n\n")[0], "cpu_allocator", seconds=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", type=Path, help="model cache directory (default: temporary)")
    parser.add_argument("--no-resnet", action="store_true")
    parser.add_argument("--cases", nargs="+", help="only these cases (e.g. 'resnet50 b8')")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.models, args.seconds, args.cases)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.models or Path(tmp)
        build(root, resnet=not args.no_resnet)
        runs: dict[str, list[dict]] = {name: [] for name in args.settings}
        for round_ in range(args.rounds):
            for name in args.settings:
                env = SETTINGS[name]
                argv = [sys.executable, __file__, "--child", "--models", str(root)]
                argv += ["--seconds", str(args.seconds)]
                argv += ["--cases", *args.cases] if args.cases else []
                done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True,
                                      text=True, timeout=600, check=True)  # fmt: skip
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"round {round_ + 1} {name}: {runs[name][-1]}", flush=True)
    write_report({"settings": SETTINGS, "medians": report(runs), "runs": runs}, args.out)


def report(runs: dict[str, list[dict]]) -> dict:
    """Print the medians over the rounds and the CPU ratios; return the medians."""
    medians = {
        name: {kind: {key: statistics.median(r[kind][key] for r in results)
                      for key in results[0][kind]}
               for kind in ("rss_mib", "cpu_ms", "wall_ms", "sys_ms", "faults")}
        for name, results in runs.items()
    }  # fmt: skip
    first = next(iter(runs))
    print(f"\nRSS MiB (median): before / {HEAVY_MODELS} x 20 MB loaded / unloaded")
    for name, median in medians.items():
        print(f"  {name:14s}" + "".join(f" {v:6.0f}" for v in median["rss_mib"].values()))
    print(
        f"\nper request (medians): CPU ms (ratio to {first}), wall ms, system CPU ms, page faults"
    )
    for label, base in medians[first]["cpu_ms"].items():
        cells = [f"{name} {m['cpu_ms'][label]:7.2f} ({m['cpu_ms'][label] / base:4.2f}) "
                 f"{m['wall_ms'][label]:7.2f} {m['sys_ms'][label]:6.2f} {m['faults'][label]:6.0f}"
                 for name, m in medians.items()]  # fmt: skip
        print(f"  {label:12s} " + " | ".join(cells))
    return medians


if __name__ == "__main__":
    main()
