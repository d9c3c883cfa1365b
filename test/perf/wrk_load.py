"""HTTP load with `wrk` (Debian package `wrk`, a C load generator): keep-alive connections
sending one POST body back to back, the result as numbers.

A Python load generator on these 2 cores takes as much CPU as the server it measures; wrk
takes a few percent, so the ratios it gives are the servers'.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

# wrk's Lua hooks: the body from a file, the status of every answer counted, each thread
# stopping after its share of requests when there is one (args[4], 0: none), one JSON line.
SCRIPT = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  local f = assert(io.open(args[1], "rb")); wrk.body = f:read("*a"); f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = args[2]
  if args[3] ~= "" then wrk.headers["Accept"] = args[3] end
  limit = tonumber(args[4]); count = 0
  bad = 0
end
function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
  count = count + 1
  if limit > 0 and count >= limit then wrk.thread:stop() end
end
function done(summary, latency, requests)
  local non200 = 0
  for _, t in ipairs(threads) do non200 = non200 + t:get("bad") end
  local e = summary.errors
  io.write(string.format('WRK {"requests": %d, "seconds": %.6f, "non200": %d, ' ..
    '"socket_errors": %d, "p50_ms": %.3f, "p99_ms": %.3f}\\n', summary.requests,
    summary.duration / 1e6, non200, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


@dataclass(frozen=True)
class Load:
    """What one wrk run did."""

    requests: int
    seconds: float
    non200: int
    socket_errors: int
    p50_ms: float
    p99_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def errors(self) -> int:
        return self.non200 + self.socket_errors

    def as_dict(self) -> dict:
        return {**asdict(self), "rps": round(self.rps, 1)}


def available() -> bool:
    return shutil.which("wrk") is not None


def post(
    url: str,
    body: bytes,
    content_type: str,
    connections: int,
    seconds: float,
    accept: str = "",
    requests: int | None = None,
) -> Load:
    """POST `body` to `url` on `connections` keep-alive connections for `seconds`, or until
    about `requests` were answered (each of wrk's threads stops after its share)."""
    threads = min(2, connections)
    with tempfile.TemporaryDirectory(prefix="wrk-") as tmp:
        script, body_file = Path(tmp) / "post.lua", Path(tmp) / "body"
        script.write_text(SCRIPT)
        body_file.write_bytes(body)
        command = [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{math.ceil(seconds)}s",  # whole seconds: wrk refuses fractions
            "--timeout",
            "60s",
            "-s",
            str(script),
            url,
            "--",
            str(body_file),
            content_type,
            accept,
            str(-(-requests // threads) if requests else 0),
        ]
        out = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=seconds + 120
        ).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK "))
    return Load(**json.loads(line[len("WRK ") :]))
