"""Render nginx.conf from nginx/nginx.conf.template and find nginx and its njs module."""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

NGINX_DIR = Path(__file__).resolve().parents[2] / "nginx"
TEMPLATE_NAME = "nginx.conf.template"
NJS_MODULE_CANDIDATES = (
    "/usr/lib/nginx/modules/ngx_http_js_module.so",
    "/usr/lib64/nginx/modules/ngx_http_js_module.so",
    "/etc/nginx/modules/ngx_http_js_module.so",
    "/usr/share/nginx/modules/ngx_http_js_module.so",
)
_PLACEHOLDER = re.compile(r"%([A-Z_]+)%")

# /invocations through njs; what njs cannot convert goes on to the Python service.
FAST_PATH_LOCATIONS = """        location = /invocations {
            js_content tfs.invocations;
        }"""

# /invocations straight to the Python service (the user's inference.py).
SERVICE_LOCATIONS = """        location = /invocations {
            proxy_pass http://python_service;
            proxy_hide_header X-Request-Id;
        }"""


# Multi-model endpoints: the /models API (loads wait up to SAGEMAKER_TFS_WAIT_TIME_SECONDS).
def multi_model_locations(load_timeout_seconds: int) -> str:
    # Model names are opaque: `/models/..%2F..%2Fping` must reach the service as it was
    # sent, so the raw request URI is matched before nginx decodes and resolves it.
    return f"""        if ($request_uri ~ "^/models(/|\\?|$)") {{
            rewrite ^ /_multi_model last;
        }}

        location = /_multi_model {{
            internal;
            proxy_pass http://python_service$request_uri;
            proxy_hide_header X-Request-Id;
            proxy_read_timeout {load_timeout_seconds}s;
        }}"""


# Always present when the Python service runs: its /ping, /metrics and the njs hand-over.
SERVICE_COMMON_LOCATIONS = """        location @python_service {
            proxy_pass http://python_service;
            proxy_hide_header X-Request-Id;
        }

        location = /metrics {
            if ($request_method !~ ^(GET|HEAD)$) { return 405; }
            proxy_pass http://python_service;
        }"""


def ping_gate(ready_file: Path) -> str:
    """In /ping's internal probe locations: 503 at once until serve has seen everything ready
    and created `ready_file` (where nginx's workers can see it). While the models load, a probe
    would be refused (or find no gunicorn socket yet), and nginx logs each refusal as an error
    of the /ping request."""
    return (
        f'if (!-f "{ready_file}") {{ '
        """return 503 '{"error": "Starting: not ready yet"}\\n'; }"""
    )


def service_ping_location(gate: str) -> str:
    """The Python service's /ping, one of /ping's probes, behind `gate` (ping_gate)."""
    return f"""        location = /_service/ping {{
            internal;
            {gate}
            proxy_pass_request_body off;
            proxy_connect_timeout 1s;
            proxy_read_timeout 1500ms;
            proxy_pass http://python_service/ping;
        }}"""


def service_upstream(socket_path: str) -> str:
    return (
        "    upstream python_service {\n"
        f"        server unix:{socket_path} max_fails=0;\n"
        "        keepalive 32;\n"
        "        keepalive_timeout 60s;\n"
        "    }"
    )


class NginxSetupError(RuntimeError):
    """nginx or its njs module is missing, or the template is incomplete."""


@dataclass(frozen=True)
class NginxLayout:
    """Where nginx, its njs module and our template + script live."""

    binary: str
    njs_module: str
    nginx_dir: Path


def find_nginx(nginx_dir: Path = NGINX_DIR) -> NginxLayout:
    binary = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if binary is None:
        raise NginxSetupError("nginx not found: install it (apt-get install nginx)")
    module = next((p for p in NJS_MODULE_CANDIDATES if Path(p).exists()), None)
    if module is None:
        raise NginxSetupError(
            "the nginx njs module was not found: install it (apt-get install libnginx-mod-http-js)"
        )
    if not (nginx_dir / TEMPLATE_NAME).exists() or not (nginx_dir / "tfs.js").exists():
        raise NginxSetupError(f"{nginx_dir} must hold {TEMPLATE_NAME} and tfs.js")
    return NginxLayout(binary, module, nginx_dir)


def size_text(num_bytes: int) -> str:
    """nginx size syntax: whole megabytes as `Nm`, else bytes."""
    mib = 1024 * 1024
    return f"{num_bytes // mib}m" if num_bytes % mib == 0 else str(num_bytes)


def upstream_servers(rest_ports: Sequence[int]) -> str:
    return "\n".join(f"        server 127.0.0.1:{port} max_fails=0;" for port in rest_ports)


def render(template: str, values: Mapping[str, object]) -> str:
    """Fill every %NAME% placeholder; a placeholder without a value is an error."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise NginxSetupError(f"nginx template placeholders without values: {missing}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def render_file(nginx_dir: Path, values: Mapping[str, object]) -> str:
    return render((nginx_dir / TEMPLATE_NAME).read_text(), values)
