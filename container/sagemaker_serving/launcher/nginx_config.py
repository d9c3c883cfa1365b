"""nginx.conf for a run, rendered from nginx/nginx.conf.j2 (Jinja2), the tables nginx/tfs.js
reads written beside it (`njs_tables`), and where nginx and its modules are."""

from __future__ import annotations

import json
import re
import select
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import jinja2

from sagemaker_serving.config import body_formats as bodies
from sagemaker_serving.config import routing_rules
from sagemaker_serving.config.access import nginx_user, write_private
from sagemaker_serving.config.body_formats import ERROR_KEY, JSON_ANSWER_BREAKS
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.errors import StartupError
from sagemaker_serving.launcher.request_counts import COUNTS_FLUSH_SECONDS, COUNTS_LOG_FORMAT
from sagemaker_serving.tfs_client.errors import UNAVAILABLE

TEMPLATE_NAME = "nginx.conf.j2"
SCRIPT_NAME = "tfs.js"
MODULE_NAME = "tfs_rules.js"  # the tables tfs.js imports (nginx's js_path names the directory)
ErrorAnswer = tuple[int, str] | tuple[int, str, str]  # status, message[, Allow header]


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
CONF_NAME = "nginx.conf"
READY_FILE = "ready"  # in the service's folder, which nginx's workers reach
# A request body nginx keeps in memory: past SageMaker's 6 MB real-time limit, so any real-time
# request can take tfs.js's fast path; a larger one is spooled to a file for the service.
BODY_IN_MEMORY = 8 * 1024 * 1024
TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")  # in the service's folder
ERROR_PAGES = (400, 403, 404, 405, 406, 411, 412, 413, 414, 415, 416, 429, 431, 500, 502, 503,
               504, 507)  # fmt: skip
# answered with their standard reason phrase (414's and 416's changed names: written out)
PLAIN_ERRORS = (400, 403, 404, 405, 406, 411, 412, 415, 431, 500, 503, 507)


def front_door_errors(settings: Settings) -> dict[str, ErrorAnswer]:
    """What nginx answers itself, by the name its error page gives (tfs.js's `error`):
    (status, message[, Allow header])."""
    limit = settings.body_limit_bytes
    timeout = settings.proxy_read_timeout_seconds
    errors: dict[str, ErrorAnswer] = {
        str(status): (status, HTTPStatus(status).phrase) for status in PLAIN_ERRORS
    }
    errors |= {
        "413": (413, f"Payload Too Large: the request body is over the limit of {limit} bytes"),
        "414": (414, "URI Too Long"),
        "416": (416, "Range Not Satisfiable"),
        "429": (
            429,
            "Too Many Requests: this client has "
            f"{settings.nginx_max_connections_per_client} requests in progress",
        ),
        "501": (400, "Bad Request: unsupported Transfer-Encoding (only chunked)"),
        "502": (502, "Bad Gateway: a backend process is unavailable"),
        "504": (504, f"Gateway Timeout: the invocation did not finish within {timeout} s"),
        "http-version": (400, "Bad Request: unsupported HTTP version (HTTP/1.0 and 1.1 only)"),
        "method": (400, "Bad Request: an unknown request method"),
        "header-bytes": (400, "Bad Request: control characters in a request header"),
        "repeated-attributes": (
            400,
            f"Bad Request: {routing_rules.HEADER} sent more than once (send one, with its "
            "attributes separated by commas)",
        ),
        "raw-bytes": (
            400,
            "Bad Request: a byte outside printable ASCII in the request target (percent-encode it)",
        ),
        "405-get": (405, "Method Not Allowed: use GET /execution-parameters", "GET, HEAD"),
        "model-server-down": (503, UNAVAILABLE),
        "model-server-timeout": (504, f"The model server did not answer within {timeout} s"),
        "starting": (503, "Starting: not ready yet"),
        "draining": (503, "Shutting down"),
    }
    assert {str(status) for status in ERROR_PAGES} <= set(errors)
    return errors


class NginxSetupError(StartupError):
    """nginx or its njs module is missing, the template is incomplete, or a path cannot be
    written into nginx.conf."""


# in a quoted nginx string: ends it, escapes, starts a variable, or no path holds it
_NOT_IN_NGINX_PATH = re.compile(r'["\\$\x00-\x1f\x7f]')


def nginx_path(value: object) -> str:
    """A path for inside the template's double quotes (a folder with a space in its name is
    fine); NginxSetupError for one nginx would read otherwise."""
    text = str(value)
    if _NOT_IN_NGINX_PATH.search(text):
        raise NginxSetupError(
            f"the path {text!r} cannot go into nginx.conf: it holds a quote, a backslash, a $ "
            "or a control character"
        )
    return text


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
    if not (nginx_dir / TEMPLATE_NAME).exists() or not (nginx_dir / SCRIPT_NAME).exists():
        raise NginxSetupError(f"{nginx_dir} must hold {TEMPLATE_NAME} and {SCRIPT_NAME}")
    return NginxLayout(binary, module, headers_more, nginx_dir)


def _whole(pattern: str) -> str:
    """A pattern matched whole, as Python's fullmatch does, for JavaScript's RegExp."""
    return f"^(?:{pattern})$"


def njs_tables(errors: dict[str, ErrorAnswer]) -> dict[str, object]:
    """The tables tfs.js reads, by their names there, from their Python homes: the routing
    rules it reads a TF Serving request's path with (config/routing_rules.py), the media types
    of a request it may pass straight on or wrap (config/body_formats.py), and nginx's own
    error answers (`front_door_errors`). tfs.js writes none of these itself."""
    return {
        "attributesHeader": routing_rules.HEADER,
        "pairPattern": routing_rules.PAIR_PATTERN.pattern,
        "modelNameKey": routing_rules.MODEL_NAME,
        "modelVersionKey": routing_rules.MODEL_VERSION,
        "methodKey": routing_rules.METHOD,
        "modelNamePattern": _whole(routing_rules.MODEL_NAME_PATTERN.pattern),
        "modelVersionPattern": _whole(routing_rules.MODEL_VERSION_PATTERN.pattern),
        "methods": dict(routing_rules.METHODS),
        "defaultMethod": routing_rules.DEFAULT_METHOD,
        "json": bodies.JSON,
        "defaultType": bodies.DEFAULT_TYPE,
        "jsonTypes": sorted(bodies.JSON_TYPES),
        "csv": bodies.CSV,
        "utf8Charsets": list(bodies.UTF8_CHARSETS),
        "jsonAnswerTypes": sorted(bodies.JSON_ANSWER_ACCEPTS),
        "requestKeys": list(bodies.REQUEST_KEYS),
        "errors": errors,
        "unknownError": "500",  # what an error page of no name of `errors` answers
    }


def write_njs_tables(directory: Path, errors: dict[str, ErrorAnswer]) -> Path:
    """The tables as the module tfs.js imports (MODULE_NAME in `directory`): one object
    literal (JSON is JavaScript)."""
    path = directory / MODULE_NAME
    path.write_text(
        "// Written by serve from the Python definitions (sagemaker_serving/launcher/"
        "nginx_config.py): do not edit.\n"
        f"export default {json.dumps(njs_tables(errors), indent=4)};\n"
    )
    return path


def size_text(num_bytes: int) -> str:
    """nginx size syntax: whole megabytes as `Nm`, else bytes."""
    mib = 1024 * 1024
    return f"{num_bytes // mib}m" if num_bytes % mib == 0 else str(num_bytes)


@dataclass
class NginxConf:
    """nginx.conf and the values it is rendered from (rendered again to drain)."""

    layout: NginxLayout
    path: Path
    values: dict[str, Any]
    errors: dict[str, ErrorAnswer] = field(default_factory=dict)

    def write(self, draining: bool = False) -> Path:
        """Write the file (and the njs tables beside it); `draining`: /ping answers 503."""
        write_njs_tables(self.path.parent, self.errors)
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(self.layout.nginx_dir),
            undefined=jinja2.StrictUndefined,  # a value the template names must be given
            keep_trailing_newline=True,
            autoescape=False,
        )
        environment.filters["path"] = nginx_path
        text = environment.get_template(TEMPLATE_NAME).render(**self.values, draining=draining)
        write_private(self.path, text)
        return self.path

    @property
    def ready_file(self) -> Path:
        """Made by serve once everything is ready: until then /ping answers 503 itself."""
        return Path(self.values["ready_file"])

    def command(self) -> list[str]:
        """nginx in the foreground on this file (add -t to only test it)."""
        run_dir = str(self.values["run_dir"])
        return [self.layout.binary, "-e", "stderr", "-p", run_dir, "-c", str(self.path)]


def nginx_conf(
    settings: Settings,
    layout: NginxLayout,
    run_dir: Path,
    *,
    listen: str,
    default_model: str,
    rest_ports: Sequence[int],
    service_socket: str,
    user_code: bool,
    shutdown_grace: int,
    counts_path: str,
) -> NginxConf:
    """The run's nginx.conf (not yet written): `listen` is nginx's `listen` address, the
    Python service listens on `service_socket` (and with `user_code` takes /invocations), nginx
    ends its own drain after `shutdown_grace` s, and writes a line per request to
    `counts_path` (request_counts.py)."""
    temp_dir = Path(service_socket).parent  # the service's folder: serve's user's
    for sub in TEMP_DIRS:
        (temp_dir / sub).mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "njs_module": layout.njs_module,
        "headers_more_module": layout.headers_more_module,
        "user": nginx_user(),
        "worker_processes": settings.nginx_worker_processes,
        "run_dir": run_dir,
        "tables_dir": run_dir,  # beside nginx.conf (NginxConf.write)
        "shutdown_grace": shutdown_grace,
        "log_level": settings.nginx_log_level,
        "nginx_dir": layout.nginx_dir,
        "temp_dir": temp_dir,
        "access_log_format": "sagemaker_json" if settings.log_format == "json" else "sagemaker",
        "log_ping": settings.log_ping,
        "counts_format": COUNTS_LOG_FORMAT,
        "counts_path": counts_path,
        "counts_buffer": select.PIPE_BUF,
        "counts_flush": f"{round(COUNTS_FLUSH_SECONDS * 1000)}ms",
        "body_limit": size_text(settings.body_limit_bytes),
        "body_in_memory": size_text(min(settings.body_limit_bytes, BODY_IN_MEMORY)),
        "client_timeout": settings.nginx_client_timeout_seconds,
        "connections_per_client": settings.nginx_max_connections_per_client,
        "proxy_timeout": settings.proxy_read_timeout_seconds,
        "rest_ports": list(rest_ports),
        "service_socket": service_socket,
        "multi_model": settings.multi_model,
        "user_code": user_code,
        # the service holds every answer to SAGEMAKER_MAX_RESPONSE_SIZE: none passes straight on
        "answer_limit": settings.max_response_size is not None,
        "listen": listen,
        "default_model": default_model,
        "error_pages": ERROR_PAGES,
        "ready_file": temp_dir / READY_FILE,
        "execution_parameters": json.dumps(settings.execution_parameters()),
        "load_timeout": settings.wait_time_seconds + 10,
        # nginx's quoted strings take \n for a newline
        "json_answer_breaks": [text.replace("\n", "\\n") for text in JSON_ANSWER_BREAKS],
        "error_key": ERROR_KEY,
    }
    return NginxConf(layout, run_dir / CONF_NAME, values, front_door_errors(settings))
