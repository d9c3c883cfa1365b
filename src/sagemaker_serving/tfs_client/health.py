"""Ask a model server (TF Serving REST API) whether every version of a model is AVAILABLE."""

from __future__ import annotations

import http.client
import json

PROMETHEUS_PATH = "/monitoring/prometheus/metrics"  # enabled on every instance serve starts


def model_available(rest_port: int, model: str, timeout: float = 2.0) -> bool:
    """True when GET /v1/models/<model> lists versions that are all AVAILABLE."""
    conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=timeout)
    try:
        conn.request("GET", f"/v1/models/{model}")
        reply = conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            return False
        versions = json.loads(body).get("model_version_status", [])
        return bool(versions) and all(v.get("state") == "AVAILABLE" for v in versions)
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def instance_up(rest_port: int, timeout: float = 2.0, path: str = PROMETHEUS_PATH) -> bool:
    """True when the model server answers its Prometheus endpoint (it needs no model)."""
    conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=timeout)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        reply.read()
        return reply.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
