"""Render nginx.conf exactly as `serve` does and run `nginx -t` on it (njs syntax included).

    python scripts/nginx_check.py        # exit 0 when nginx accepts every rendered variant

nginx compiles tfs.js (js_import) while it tests the config, so a syntax error in the njs
module fails here as it would at container start. Both /invocations variants are checked: the
njs fast path, the Python service (user code) and a multi-model endpoint.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from sagemaker_serving.config.access import new_access
from sagemaker_serving.config.model_discovery import Model
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.frontdoor.nginx_config import find_nginx
from sagemaker_serving.launcher.serve import StartupError, nginx_child
from sagemaker_serving.launcher.service_process import ServiceProcess
from sagemaker_serving.launcher.supervisor import Child

# this checkout's nginx/ (the installed package may point at another checkout's)
REPO_NGINX_DIR = (
    Path(__file__).resolve().parents[1] / "src" / "sagemaker_serving" / "frontdoor" / "nginx"
)


def check_variant(
    run_dir: Path, user_code: bool, nginx_dir: Path, multi_model: bool = False
) -> tuple[bool, str]:
    """(accepted, nginx's output) for one config rendered from `nginx_dir` into `run_dir`."""
    settings = Settings.from_env({"SAGEMAKER_MULTI_MODEL": "true"} if multi_model else {})
    layout = find_nginx(nginx_dir)
    socket_dir = run_dir / "service"
    socket_dir.mkdir(parents=True, exist_ok=True)
    service = ServiceProcess(
        Child("python-service", ["true"]),
        str(socket_dir / "gunicorn.sock"),
        socket_dir,
        user_code,
        socket_dir / "front-metrics.sock",
        new_access(),
    )
    models = [Model("half_plus_three", run_dir / "models" / "half_plus_three", (123, 124))]
    if multi_model:
        models = []
    default = "" if multi_model else "half_plus_three"
    try:
        _, conf = nginx_child(
            settings, layout, run_dir, "127.0.0.1", models, default, [8501], service
        )
    except StartupError as exc:
        return False, str(exc)
    result = subprocess.run(
        [layout.binary, "-e", "stderr", "-p", str(run_dir), "-c", str(conf.path), "-t"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return result.returncode == 0, result.stdout + result.stderr


def check_all(nginx_dir: Path = REPO_NGINX_DIR) -> list[tuple[str, bool, str]]:
    """(variant, accepted, output) for the fast-path and the user-code configs."""
    results = []
    with tempfile.TemporaryDirectory(prefix="nginx-check-") as tmp:
        variants = (
            ("fast-path", False, False),
            ("user-code", True, False),
            ("multi-model", True, True),
        )
        for name, user_code, multi_model in variants:
            accepted, output = check_variant(Path(tmp) / name, user_code, nginx_dir, multi_model)
            results.append((name, accepted, output))
    return results


def main() -> int:
    failed = 0
    for name, accepted, output in check_all():
        print(f"nginx -t ({name}): {'ok' if accepted else 'REJECTED'}")
        if not accepted:
            failed += 1
            print(output, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
