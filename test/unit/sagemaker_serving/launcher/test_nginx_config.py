"""sagemaker_serving.launcher.nginx_config: nginx.conf rendered as serve renders it, for the
fast path, user code and a multi-model endpoint, and accepted by the real `nginx -t` (which also
compiles tfs.js, so an njs syntax error fails here as it would at container start)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagemaker_serving.config.access import new_token
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.errors import error_body
from sagemaker_serving.launcher.nginx_config import (
    NGINX_DIR,
    NginxConf,
    NginxSetupError,
    find_nginx,
    nginx_conf,
    ping_targets,
    render,
    size_text,
)

VARIANTS = {  # name: (environment, user code)
    "fast-path": ({}, False),
    "user-code": ({}, True),
    "multi-model": ({"SAGEMAKER_MULTI_MODEL": "true"}, True),
}


@dataclass(frozen=True)
class ServiceLink:
    """The Python service as nginx sees it (serve's ServiceProcess without the process)."""

    socket_path: str
    token: str
    handles_invocations: bool


def render_variant(run_dir: Path, variant: str, nginx_dir: Path = NGINX_DIR) -> NginxConf:
    """nginx.conf for `variant` written into `run_dir`, as serve writes it."""
    env, user_code = VARIANTS[variant]
    settings = Settings.from_env(env)
    sockets = run_dir / "service"
    sockets.mkdir(parents=True)
    multi_model = settings.multi_model
    conf = nginx_conf(
        settings,
        find_nginx(nginx_dir),
        run_dir,
        listen="127.0.0.1:8080",
        default_model="" if multi_model else "half_plus_three",
        rest_ports=[8501, 8503],
        model_names=[] if multi_model else ["half_plus_three"],
        service=ServiceLink(str(sockets / "gunicorn.sock"), new_token(), user_code),
        ready_file=run_dir / "ping" / "ready",
        shutdown_grace=17,
    )
    conf.write()
    return conf


def nginx_test(conf: NginxConf) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*conf.command(), "-t"], capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_nginx_accepts_the_rendered_config(tmp_path: Path, variant: str):
    conf = render_variant(tmp_path, variant)
    result = nginx_test(conf)
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_nginx_rejects_an_njs_syntax_error(tmp_path: Path, variant: str):
    nginx_dir = tmp_path / "nginx"
    shutil.copytree(NGINX_DIR, nginx_dir)
    with (nginx_dir / "tfs.js").open("a") as f:
        f.write("\nfunction broken( {\n")
    result = nginx_test(render_variant(tmp_path / "run", variant, nginx_dir))
    assert result.returncode != 0
    assert "tfs.js" in result.stderr


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_json_answer_nginx_makes_itself_has_the_python_services_keys(
    tmp_path: Path, variant: str
):
    """nginx's own error bodies (`return NNN '{...}'`) have the keys of the Python service's
    one writer (errors.error_body); tfs.js's sendError writes the same two."""
    text = render_variant(tmp_path, variant).path.read_text()
    bodies = re.findall(r"return\s+(\d{3})\s+'(\{[^']*\})\\n'", text)
    assert len(bodies) > 20, bodies  # the error pages, the methods, the checks, ...
    python_keys = set(json.loads(error_body("m", "r")))
    for status, body in bodies:
        doc = json.loads(body.replace("$req_id", "r"))
        assert set(doc) == python_keys and doc["request_id"] == "r", (status, body)
    njs = (NGINX_DIR / "tfs.js").read_text()
    assert "sendJson(r, status, {error: clean(message), request_id: r.variables.req_id});" in njs


def test_the_variants_route_invocations_where_they_should(tmp_path: Path):
    text = {name: render_variant(tmp_path / name, name).path.read_text() for name in VARIANTS}
    assert "js_content tfs.invocations;" in text["fast-path"]
    invocations = text["user-code"].split("location = /invocations {", 1)[1].split("\n        }")[0]
    assert "rewrite ^ /invocations? break;" in invocations  # its query is not passed on
    assert "proxy_pass http://python_service;" in invocations
    assert "$multi_model_route" not in text["user-code"]
    assert "rewrite ^ /_multi_model last;" in text["multi-model"]
    assert "model=/_instance/8503/v1/models/half_plus_three" in text["fast-path"]


def test_the_config_is_private_and_draining_rewrites_it(tmp_path: Path):
    conf = render_variant(tmp_path, "fast-path")
    assert conf.path.stat().st_mode & 0o777 == 0o600  # it holds the run's secret
    before = conf.path.read_text()
    conf.write(draining=True)
    after = conf.path.read_text()
    assert before != after
    assert nginx_test(conf).returncode == 0


def test_ping_targets():
    assert ping_targets([8501, 8503], ["a", "b"]) == (
        "model=/_instance/8501/v1/models/a model=/_instance/8501/v1/models/b "
        "model=/_instance/8503/v1/models/a model=/_instance/8503/v1/models/b"
    )
    # multi-model: the Python service's /ping alone (it knows whether every instance is up);
    # never the metrics page (it grows with every model ever loaded)
    assert ping_targets([8501], []) == ""


def test_render_needs_a_value_for_every_placeholder():
    assert render("listen %LISTEN%;", {"LISTEN": 8080, "OTHER": 1}) == "listen 8080;"
    with pytest.raises(NginxSetupError, match=r"\['LISTEN', 'USER'\]"):
        render("user %USER%; listen %LISTEN%;", {})


@pytest.mark.parametrize(
    ("num_bytes", "text"), [(100 << 20, "100m"), (6 << 20, "6m"), ((1 << 20) + 1, "1048577")]
)
def test_size_text(num_bytes: int, text: str):
    assert size_text(num_bytes) == text


def test_find_nginx_needs_the_template_and_tfs_js(tmp_path: Path):
    with pytest.raises(NginxSetupError, match=r"nginx\.conf\.template and tfs\.js"):
        find_nginx(tmp_path)
    assert find_nginx().nginx_dir == NGINX_DIR


@pytest.mark.parametrize(
    ("cpus", "env", "workers"),
    [(1, {}, 1), (2, {}, 1), (8, {}, 4), (2, {"SAGEMAKER_NGINX_WORKER_PROCESSES": "2"}, 2)],
)
def test_nginx_worker_processes(tmp_path: Path, cpus: int, env: dict, workers: int):
    settings = Settings.from_env(env, cpu_count=cpus)
    (tmp_path / "service").mkdir()
    conf = nginx_conf(
        settings,
        find_nginx(NGINX_DIR),
        tmp_path,
        listen="127.0.0.1:8080",
        default_model="m",
        rest_ports=[8501],
        model_names=["m"],
        service=ServiceLink(str(tmp_path / "service" / "g.sock"), new_token(), False),
        ready_file=tmp_path / "ping" / "ready",
        shutdown_grace=17,
    )
    text = conf.write().read_text()
    assert f"\nworker_processes {workers};\n" in text
