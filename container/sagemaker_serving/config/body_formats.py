"""What /invocations bodies may be: the Content-Type names of the built-in formats, the Accept
names answers come in, and the top-level keys of TF Serving's request and answer bodies.

The one home of these tables: the Python service's formats read them (formats/), and serve
writes those nginx/tfs.js needs to pass a TF Serving request straight on into its tables
(launcher/nginx_config.py).
"""

from __future__ import annotations

JSON = "application/json"
# curl -d sends application/x-www-form-urlencoded: such bodies are read as JSON.
JSON_TYPES = frozenset({JSON, "application/x-www-form-urlencoded"})
JSON_LINES_NAMES = (
    "application/jsonlines",
    "application/jsons",
    "application/x-jsonlines",
    "application/json-lines",
    "application/x-ndjson",
    "application/ndjson",
)
JSON_LINES_TYPES = frozenset(JSON_LINES_NAMES)
CSV = "text/csv"
UTF8_CHARSETS = ("utf-8", "utf8")  # CSV's charset names read as UTF-8 (any case)
BYTES_TYPES = frozenset({"application/x-image", "application/octet-stream"})
NPY = "application/x-npy"
TFEXAMPLE_TYPES = frozenset(
    {"application/x-tfexample", "application/tfrecord", "application/x-tfrecord"}
)

TEXT_TYPES = frozenset({*JSON_TYPES, *JSON_LINES_TYPES, CSV})
BINARY_TYPES = frozenset({NPY, *BYTES_TYPES, *TFEXAMPLE_TYPES})  # the Python service's alone
DEFAULT_TYPE = JSON  # a request without a Content-Type, an answer without an Accept

# Accept: supported answer types in tie-break order (a wildcard prefers the earliest).
ACCEPT_TYPES = (JSON, *JSON_LINES_NAMES, CSV)
# Accept values (whole, lowercase) whose answer is JSON whatever the answer holds: nginx may
# pass a TF Serving request with one of these (or none) straight to the model server.
JSON_ANSWER_ACCEPTS = frozenset({JSON, "*/*", "application/*"})
# A JSON answer (the model server's error answers too) is its text without line breaks: TF
# Serving pretty-prints, indenting by 4 spaces, and a newline is never inside a JSON string.
# Each newline goes with the indentation after it (at most 8 levels; the first of these that
# matches at a place, as nginx's sub_filter matches), so an answer is one line (Batch
# Transform's AssembleWith=Line) and the same on every path: nginx's sub_filter for a request
# passed straight on, formats/answers.py for the rest.
JSON_ANSWER_BREAKS = tuple("\n" + " " * (4 * depth) for depth in range(8, -1, -1))
# A model server's error answer goes on as it wrote it, naming the request as every error
# does: its `"error": "` key (TF Serving's `{ "error": "..." }`, a message without line breaks)
# follows `"request_id": "<id>", ` (nginx's sub_filter, formats/answers.py: one rule).
ERROR_KEY = '"error": "'
SUPPORTED = "application/json, application/jsonlines, text/csv"
# An Accept range's q value (matched whole; in the syntax Python and JavaScript share).
QVALUE_PATTERN = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
MAX_ECHO = 200  # characters of a client's header echoed in an error message

# TF Serving's REST bodies: a request is an object with one of these keys first (it passes
# through as it is), an answer an object with one of these (`outputs`: columnar).
REQUEST_KEYS = ("instances", "inputs", "examples")
COLUMNAR_ANSWER_KEY = "outputs"
ANSWER_KEYS = ("predictions", "results", COLUMNAR_ANSWER_KEY)
