"""nginx.conf for a run, rendered from nginx/nginx.conf.template, and where nginx and its
modules are."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sagemaker_serving.config.access import nginx_user, write_private
from sagemaker_serving.config.execution_parameters import execution_parameters
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.errors import StartupError
from sagemaker_serving.launcher.front_log_relay import FRONT_LOG, new_log, nginx_access_log
from sagemaker_serving.launcher.njs_tables import write_njs_tables

TEMPLATE_NAME = "nginx.conf.template"


def _assets() -> Path:
    """nginx/ (the template and tfs.js): the package's data once installed from a wheel (the
    image), else the checkout's top-level nginx/ (an editable install)."""
    package = Path(__file__).resolve().parents[1]  # sagemaker_serving/
    candidates = (package / "nginx", package.parents[1] / "nginx")
    return next((c for c in candidates if (c / TEMPLATE_NAME).is_file()), candidates[0])


NGINX_DIR = _assets()
MODULE_DIRS = (
    "/usr/lib/nginx/modules",
    "/usr/lib64/nginx/modules",
    "/etc/nginx/modules",
    "/usr/share/nginx/modules",
)
NJS_MODULE = "ngx_http_js_module.so"
HEADERS_MORE_MODULE = "ngx_http_headers_more_filter_module.so"
_PLACEHOLDER = re.compile(r"%([A-Z_]+)%")
CONF_NAME = "nginx.conf"
ANSWER_LIMIT_FACTOR = 4  # the fast path holds model server answers up to 4x the body limit
PROBE_BUFFER = "1m"  # /ping's probes read at most this: a status answer is a few hundred bytes
TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")  # under nginx_temp_root()

# /invocations through njs; what njs cannot convert goes on to the Python service.
FAST_PATH_LOCATIONS = """        location = /invocations {
            js_content tfs.invocations;
        }"""

# /invocations straight to the Python service (the user's inference.py); the query string
# means nothing to it and is not passed (nor are its raw bytes, which the service's HTTP
# parser would refuse).
_POST_ONLY = '{"error": "Method Not Allowed: use POST /invocations", "request_id": "$req_id"}'
SERVICE_LOCATIONS = f"""        location = /invocations {{
            if ($request_method != POST) {{
                add_header Allow POST always;
                add_header X-Request-Id $req_id always;
                return 405 '{_POST_ONLY}\\n';
            }}
            rewrite ^ /invocations? break;
            proxy_pass http://python_service;
            proxy_hide_header X-Request-Id;
        }}"""


# What the service's HTTP parser would refuse in a request passed on as sent: a raw byte
# outside printable ASCII in its target, a method outside HTTP's (JSON answers from nginx)
_RAW_BYTES = (
    '{"error": "Bad Request: a byte outside printable ASCII in the request target '
    '(percent-encode it)", "request_id": "$req_id"}'
)
_HTTP_METHODS = "GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS"


# Multi-model endpoints: the /models API (loads wait up to SAGEMAKER_TFS_WAIT_TIME_SECONDS).
def multi_model_locations(load_timeout_seconds: int) -> str:
    # Model names are opaque: `/models/..%2F..%2Fping` must reach the service as it was
    # sent, so the raw request URI is matched before nginx decodes and resolves it; never on
    # an error page's internal redirect (that one re-runs this with the original URI).
    return f"""        if ($multi_model_route) {{
            rewrite ^ /_multi_model last;
        }}

        location = /_multi_model {{
            internal;
            if ($request_uri ~ "[^\\x21-\\x7e]") {{
                return 400 '{_RAW_BYTES}\\n';
            }}
            if ($request_method !~ ^({_HTTP_METHODS})$) {{
                return 405;
            }}
            proxy_pass http://python_service$request_uri;
            proxy_hide_header X-Request-Id;
            proxy_read_timeout {load_timeout_seconds}s;
        }}"""


# The maps behind `$multi_model_route` (http level; volatile: re-evaluated after a redirect).
MULTI_MODEL_MAPS = """    map $request_uri $multi_model_uri {
        "~^/models(/|\\?|$)" 1;
        default 0;
    }
    map $uri $not_error_page {
        volatile;
        "~^/_error/" 0;
        default 1;
    }
    map "$multi_model_uri$not_error_page" $multi_model_route {
        volatile;
        "11" 1;
        default 0;
    }"""

# Always present when the Python service runs: its /ping, /metrics and the njs hand-over.
SERVICE_COMMON_LOCATIONS = """        location @python_service {
            rewrite ^ /invocations? break;
            proxy_pass http://python_service;
            proxy_hide_header X-Request-Id;
        }

        location = /metrics {
            if ($request_method !~ ^(GET|HEAD)$) { return 405; }
            rewrite ^ /metrics? break;  # the query means nothing to it: not passed
            proxy_pass http://python_service;
        }"""


def ping_gate(ready_file: Path) -> str:
    """In /ping's internal probe locations: 503 at once until serve has seen everything ready
    and created `ready_file` (where nginx's workers can see it). While the models load, a probe
    would be refused (or find no gunicorn socket yet), and nginx logs each refusal as an error
    of the /ping request."""
    return (
        f'if (!-f "{ready_file}") {{ '
        """return 503 '{"error": "Starting: not ready yet", "request_id": "$req_id"}\\n'; }"""
    )


def service_ping_location(gate: str) -> str:
    """The Python service's /ping, one of /ping's probes, behind `gate` (ping_gate)."""
    return f"""        location = /_service/ping {{
            internal;
            {gate}
            proxy_pass_request_body off;
            # no body, so no length (else: request desync); a location that sets a header
            # inherits none, so the others are set again
            proxy_set_header Content-Length "";
            proxy_set_header Connection "";
            proxy_set_header Host localhost;
            proxy_set_header X-Request-Id $req_id;
            proxy_set_header X-Sagemaker-Serving-Token $service_token;
            proxy_connect_timeout 1s;
            proxy_read_timeout 1500ms;
            proxy_buffering off;  # into a bound its answer never reaches: it cannot hang
            subrequest_output_buffer_size {PROBE_BUFFER};
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


class NginxSetupError(StartupError):
    """nginx or its njs module is missing, or the template is incomplete."""


@dataclass(frozen=True)
class NginxLayout:
    """Where nginx, its njs module and our template + script live."""

    binary: str
    njs_module: str
    headers_more_module: str
    nginx_dir: Path


def _module(name: str) -> str | None:
    return next((f"{d}/{name}" for d in MODULE_DIRS if Path(d, name).exists()), None)


def find_nginx(nginx_dir: Path = NGINX_DIR) -> NginxLayout:
    binary = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if binary is None:
        raise NginxSetupError("nginx not found: install it (apt-get install nginx)")
    module = _module(NJS_MODULE)
    if module is None:
        raise NginxSetupError(
            "the nginx njs module was not found: install it (apt-get install libnginx-mod-http-js)"
        )
    headers_more = _module(HEADERS_MORE_MODULE)
    if headers_more is None:
        raise NginxSetupError(
            "the nginx headers-more module was not found: install it "
            "(apt-get install libnginx-mod-http-headers-more-filter)"
        )
    if not (nginx_dir / TEMPLATE_NAME).exists() or not (nginx_dir / "tfs.js").exists():
        raise NginxSetupError(f"{nginx_dir} must hold {TEMPLATE_NAME} and tfs.js")
    return NginxLayout(binary, module, headers_more, nginx_dir)


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


class PythonServiceLink(Protocol):
    """What nginx needs of the Python service (serve's ServiceProcess)."""

    @property
    def socket_path(self) -> str: ...  # gunicorn's unix socket

    @property
    def token(self) -> str: ...  # the run's secret, sent along to the service

    @property
    def handles_invocations(self) -> bool: ...  # user code: /invocations goes to it


def nginx_temp_root(service: PythonServiceLink) -> Path:
    """Where nginx's workers write request bodies that outgrow memory (a chunked body near the
    limit: its framing takes room in the buffer too): the directory of the service's socket
    (0700, serve's user: nginx's too); nginx makes the folders in it."""
    return Path(service.socket_path).parent


def ping_targets(rest_ports: Sequence[int], model_names: Sequence[str]) -> str:
    """What /ping checks besides the Python service, as `kind=internal URI` (tfs.js ping):
    `model=` every model AVAILABLE on every model server instance. With no models
    (multi-model), nothing: the service's /ping tells whether every instance is up
    (health.InstanceWatch), so /ping neither waits for a model server busy loading models
    nor reads a page that grows with every model loaded (the metrics)."""
    return " ".join(
        f"model=/_instance/{port}/v1/models/{m}" for port in rest_ports for m in model_names
    )


@dataclass
class NginxConf:
    """nginx.conf and the values it is rendered from (rendered again to drain)."""

    layout: NginxLayout
    path: Path
    values: dict[str, object]
    front_log: Path  # a line per request nginx answers (front_log_relay.py)

    def write(self, draining: bool = False) -> Path:
        """Write the file (0600: it holds the run's secret) and the njs tables beside it
        (njs_tables.py); `draining`: /ping answers 503."""
        self.values["DRAINING"] = "1" if draining else "0"
        write_njs_tables(self.path.parent)
        write_private(self.path, render_file(self.layout.nginx_dir, self.values))
        return self.path

    def command(self) -> list[str]:
        """nginx in the foreground on this file (add -t to only test it)."""
        run_dir = str(self.values["RUN_DIR"])
        return [self.layout.binary, "-e", "stderr", "-p", run_dir, "-c", str(self.path)]


def nginx_conf(
    settings: Settings,
    layout: NginxLayout,
    run_dir: Path,
    *,
    listen: str,
    default_model: str,
    rest_ports: Sequence[int],
    model_names: Sequence[str],
    service: PythonServiceLink,
    ready_file: Path,
    shutdown_grace: int,
) -> NginxConf:
    """The run's nginx.conf (not yet written): `listen` is nginx's `listen` address, /ping
    waits for `ready_file` (ping_gate), nginx ends its own drain after `shutdown_grace` s."""
    gate = ping_gate(ready_file)
    temp_root = nginx_temp_root(service)
    for sub in TEMP_DIRS:
        (temp_root / sub).mkdir(exist_ok=True)
    front_log = new_log(run_dir / FRONT_LOG)
    invocations = SERVICE_LOCATIONS if service.handles_invocations else FAST_PATH_LOCATIONS
    upstreams = service_upstream(service.socket_path)
    if settings.multi_model:
        invocations += "\n\n" + multi_model_locations(settings.wait_time_seconds + 10)
        upstreams += "\n\n" + MULTI_MODEL_MAPS
    values: dict[str, object] = {
        "NJS_MODULE": layout.njs_module,
        "HEADERS_MORE_MODULE": layout.headers_more_module,
        "CLIENT_TIMEOUT": settings.nginx_client_timeout_seconds,
        "CONNECTIONS_PER_CLIENT": settings.nginx_max_connections_per_client,
        "WORKER_PROCESSES": settings.nginx_worker_processes,
        "RUN_DIR": run_dir,
        "NGINX_TEMP": temp_root,
        "LOG_LEVEL": settings.nginx_log_level,
        "SHUTDOWN_GRACE": shutdown_grace,
        "PING_GATE": gate,
        "PROBE_BUFFER": PROBE_BUFFER,
        "NGINX_DIR": layout.nginx_dir,
        "NJS_TABLES_DIR": run_dir,  # beside nginx.conf (NginxConf.write)
        "ACCESS_LOG": "/dev/stdout",
        "ACCESS_LOG_FORMAT": "sagemaker_json" if settings.log_format == "json" else "sagemaker",
        "BODY_LIMIT": size_text(settings.body_limit_bytes),
        "RESPONSE_BUFFER": size_text(ANSWER_LIMIT_FACTOR * settings.body_limit_bytes),
        "PROXY_TIMEOUT": settings.proxy_read_timeout_seconds,
        "TFS_SERVERS": upstream_servers(rest_ports),
        "EXTRA_UPSTREAMS": upstreams,
        "LISTEN": listen,
        "DEFAULT_MODEL": default_model,
        "EXECUTION_PARAMETERS": json.dumps(execution_parameters(settings)),
        "INVOCATIONS_LOCATIONS": invocations,
        "SERVICE_LOCATIONS": SERVICE_COMMON_LOCATIONS + "\n\n" + service_ping_location(gate),
        "METRICS_LOG": nginx_access_log(front_log),
        "SERVICE_TOKEN": service.token,
        "NGINX_USER": nginx_user(),
        # multi-model: 200 once the service is up, whatever is loaded
        "PING_TARGETS": f"{ping_targets(rest_ports, model_names)} ok=/_service/ping".strip(),
    }
    return NginxConf(layout, run_dir / CONF_NAME, values, front_log)
