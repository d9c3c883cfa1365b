"""sagemaker_serving.launcher.nginx_config: nginx.conf rendered from nginx/nginx.conf.j2 as
serve renders it, without user code, with user code and on a multi-model endpoint, and
accepted by the real `nginx -t` (which also compiles tfs.js, so an njs syntax error fails here
as it would at container start)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import (
    ERROR_PAGES,
    NGINX_DIR,
    NginxConf,
    NginxSetupError,
    find_nginx,
    front_door_errors,
    nginx_conf,
    size_text,
)

VARIANTS = {  # name: (environment, user code)
    "built-in": ({}, False),
    "user-code": ({}, True),
    "multi-model": ({"SAGEMAKER_MULTI_MODEL": "true"}, True),
}


def conf_for(run_dir: Path, settings: Settings, user_code: bool, nginx_dir: Path) -> NginxConf:
    sockets = run_dir / "service"
    sockets.mkdir(parents=True, exist_ok=True)
    return nginx_conf(
        settings,
        find_nginx(nginx_dir),
        run_dir,
        listen="127.0.0.1:8080",
        default_model="" if settings.multi_model else "half_plus_three",
        rest_ports=[8501, 8503],
        service_socket=str(sockets / "gunicorn.sock"),
        user_code=user_code,
        shutdown_grace=17,
        counts_path="/dev/null",
    )


def render_variant(run_dir: Path, variant: str, nginx_dir: Path = NGINX_DIR) -> NginxConf:
    """nginx.conf for `variant` written into `run_dir`, as serve writes it."""
    env, user_code = VARIANTS[variant]
    conf = conf_for(run_dir, Settings.from_env(env), user_code, nginx_dir)
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


def test_folders_with_spaces_in_their_names_are_fine(tmp_path: Path):
    """A checkout and a run directory under "My Projects/" (every path the template names)."""
    nginx_dir = tmp_path / "My Projects" / "nginx files"
    shutil.copytree(NGINX_DIR, nginx_dir)
    run_dir = tmp_path / "My Projects" / "run dir"
    conf = conf_for(run_dir, Settings.from_env({}), True, nginx_dir)
    conf.write()
    result = nginx_test(conf)
    assert result.returncode == 0, result.stderr
    assert f'pid "{run_dir}/nginx.pid";' in conf.path.read_text()


@pytest.mark.parametrize("name", ['say "hi"', "back\\slash", "$HOME", "new\nline"])
def test_a_path_nginx_would_read_otherwise_is_refused(tmp_path: Path, name: str):
    conf = conf_for(tmp_path / name, Settings.from_env({}), False, NGINX_DIR)
    with pytest.raises(NginxSetupError, match=r"cannot go into nginx\.conf"):
        conf.write()


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
def test_every_answer_nginx_makes_itself_is_written_by_one_function(tmp_path: Path, variant):
    """No `return NNN 'body'` in the config: every error page goes to tfs.js's `error`, which
    answers from the error table (every page has an entry), and the only answer nginx writes
    itself is /execution-parameters' (tfs.js's `jsonAnswer`, after the conditional headers
    are cleared)."""
    text = render_variant(tmp_path, variant).path.read_text()
    returns = re.findall(r"return\s+(\d{3})\b([^;]*);", text)
    assert not [body for _, body in returns if body.strip()]  # `return 405;` has none
    answers = re.findall(r"set \$json_answer '([^']*)';\s+js_content tfs.jsonAnswer;", text)
    assert len(answers) == 1 and "MaxConcurrentTransforms" in json.loads(answers[0])
    assert all(int(status) in ERROR_PAGES for status, body in returns if not body.strip())
    pages = set(re.findall(r"error_page ([\d ]+)(?: =\d+)? /_error/([\w-]+);", text))
    errors = front_door_errors(Settings.from_env({}))
    assert {name for _, name in pages} <= set(errors)
    assert {str(status) for status in ERROR_PAGES} <= {name for _, name in pages}
    assert text.count("js_content tfs.error;") == 1


def test_the_variants_route_invocations_where_they_should(tmp_path: Path):
    text = {name: render_variant(tmp_path / name, name).path.read_text() for name in VARIANTS}
    assert "js_content tfs.invocations;" in text["built-in"]
    invocations = text["user-code"].split("location = /invocations {", 1)[1].split("\n        }")[0]
    assert "rewrite ^ /invocations? break;" in invocations  # its query is not passed on
    assert "proxy_pass http://python_service;" in invocations
    assert "$multi_model_route" not in text["user-code"]
    assert "rewrite ^ /_multi_model last;" in text["multi-model"]
    for variant in VARIANTS:  # /ping is the Python service's readiness, on every variant
        assert "proxy_pass http://python_service/ping;" in text[variant]


def test_the_config_is_private_and_draining_rewrites_it(tmp_path: Path):
    conf = render_variant(tmp_path, "built-in")
    assert conf.path.stat().st_mode & 0o777 == 0o600
    before = conf.path.read_text()
    conf.write(draining=True)
    after = conf.path.read_text()
    assert before != after and "rewrite ^ /_error/draining last;" in after
    assert nginx_test(conf).returncode == 0


def test_the_template_needs_a_value_for_every_name_it_uses(tmp_path: Path):
    conf = render_variant(tmp_path, "built-in")
    del conf.values["listen"]
    with pytest.raises(jinja2.UndefinedError, match="listen"):
        conf.write()


@pytest.mark.parametrize(
    ("num_bytes", "text"), [(100 << 20, "100m"), (6 << 20, "6m"), ((1 << 20) + 1, "1048577")]
)
def test_size_text(num_bytes: int, text: str):
    assert size_text(num_bytes) == text


def test_find_nginx_needs_the_template_and_tfs_js(tmp_path: Path):
    with pytest.raises(NginxSetupError, match=r"nginx\.conf\.j2 and tfs\.js"):
        find_nginx(tmp_path)
    assert find_nginx().nginx_dir == NGINX_DIR


@pytest.mark.parametrize(
    ("cpus", "env", "workers"),
    [(1, {}, 1), (2, {}, 1), (8, {}, 4), (2, {"SAGEMAKER_NGINX_WORKER_PROCESSES": "2"}, 2)],
)
def test_nginx_worker_processes(tmp_path: Path, cpus: int, env: dict, workers: int):
    conf = conf_for(tmp_path, Settings.from_env(env, cpu_count=cpus), False, NGINX_DIR)
    text = conf.write().read_text()
    assert f"\nworker_processes {workers};\n" in text


def test_ping_waits_for_the_ready_file_in_the_services_private_folder(tmp_path: Path):
    conf = render_variant(tmp_path, "built-in")
    assert conf.ready_file == tmp_path / "service" / "ready"
    assert f'if (!-f "{conf.ready_file}")' in conf.path.read_text()
