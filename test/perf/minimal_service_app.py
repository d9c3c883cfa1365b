"""The least a gunicorn + falcon service can do per request: the report's service ceiling.

One route, POST /invocations: the body (or, with MINIMAL_WRAP_B64=1, {"instances": [{"b64": ...}]}
around it, as the classic JPEG inference.py sends) goes to the model server's REST predict URL
on a kept-alive http.client connection per thread, and its answer comes back unchanged. No
formats, user code, metrics, logging or error handling: reference_frontends.py runs it under
gunicorn with the service's own worker class, workers and threads.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import threading

import falcon

PORT = int(os.environ["MINIMAL_MODEL_SERVER_PORT"])
PATH = os.environ["MINIMAL_PREDICT_PATH"]
WRAP_B64 = os.environ.get("MINIMAL_WRAP_B64") == "1"
HEADERS = {"Content-Type": "application/json"}
_local = threading.local()


class Forward:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.bounded_stream.read()
        if WRAP_B64:
            body = json.dumps({"instances": [{"b64": base64.b64encode(body).decode()}]}).encode()
        conn = getattr(_local, "conn", None)
        if conn is None:
            conn = _local.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        conn.request("POST", PATH, body, HEADERS)
        answer = conn.getresponse()
        resp.data = answer.read()
        resp.status = answer.status
        resp.content_type = "application/json"


app = falcon.App()
app.add_route("/invocations", Forward())
