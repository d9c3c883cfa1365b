"""The least a gunicorn + falcon service can do per request: the report's service ceiling.

One route, POST /invocations: the body (or, with MINIMAL_WRAP_B64=1, {"instances": [{"b64": ...}]}
around it, as the classic JPEG inference.py sends) goes to the model server's REST predict URL
on a kept-alive connection from the event loop (the service's own http11 pool), and its
answer comes back unchanged. No formats, user code, metrics, logging or error handling:
reference_frontends.py runs it under gunicorn with the Python service's worker class and
workers.
"""

from __future__ import annotations

import base64
import json
import os
import time

import falcon.asgi

from sagemaker_serving.tfs_client.http11 import ConnectionPool

PORT = int(os.environ["MINIMAL_MODEL_SERVER_PORT"])
PATH = os.environ["MINIMAL_PREDICT_PATH"]
WRAP_B64 = os.environ.get("MINIMAL_WRAP_B64") == "1"
HEADERS = {"Content-Type": "application/json"}
pool = ConnectionPool("127.0.0.1", PORT)


class Forward:
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await req.stream.read()
        if WRAP_B64:
            body = json.dumps({"instances": [{"b64": base64.b64encode(body).decode()}]}).encode()
        answer = await pool.exchange("POST", PATH, body, HEADERS, time.monotonic() + 60)
        resp.data = answer.body
        resp.status = answer.status
        resp.content_type = "application/json"


app = falcon.asgi.App()
app.add_route("/invocations", Forward())
