"""Invocations that take a chosen time, all at once, with /ping asked meanwhile: how the native
and the image tests show SAGEMAKER_MODEL_SERVER_TIMEOUT (docs/hosting-modes.md)."""

from __future__ import annotations

import json
import statistics
import threading
import time
from dataclasses import dataclass, field

import requests

# code/inference.py: a request of type application/x-sleep sleeps its body's seconds, then
# asks the model for y(1.0); any other passes through.
SLEEPER = """
import time


def input_handler(data, context):
    if context.request_content_type == "application/x-sleep":
        time.sleep(float(data.read()))
        return '{"instances": [1.0]}'
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
"""


PING_DEADLINE_SECONDS = 2.0  # SageMaker's health check (contracts.md)


@dataclass
class SlowRun:
    """What came back: (status, body, seconds) per invocation by stack, and /ping's times."""

    answers: dict[str, list[tuple[int, bytes, float]]] = field(default_factory=dict)
    pings: list[float] = field(default_factory=list)

    def ping_summary(self) -> str:
        return (
            f"/ping: {len(self.pings)} asked, median {statistics.median(self.pings) * 1000:.1f} "
            f"ms, max {max(self.pings) * 1000:.1f} ms"
        )

    def check_deadlines(self, slept: float, timeouts: dict[str, int]) -> None:
        """Each stack's invocations (of SLEEPER, `slept` s; the stack's
        SAGEMAKER_MODEL_SERVER_TIMEOUT in `timeouts`) answered 200 when they fit the timeout,
        else 504 JSON at it; every /ping meanwhile within SageMaker's 2 s (a /ping queued
        behind an invocation would take its 40 s; the figures are printed, not asserted: they
        depend on the machine's load)."""
        for key, timeout in timeouts.items():
            for status, body, took in self.answers[key]:
                if slept < timeout:
                    assert (status, json.loads(body)) == (200, {"predictions": [3.5]})
                    assert took >= slept
                else:
                    assert status == 504, body
                    assert json.loads(body)["error"].endswith(f"did not finish within {timeout} s")
                    assert timeout - 1 <= took < slept
        print(self.ping_summary())
        assert len(self.pings) > 100
        assert max(self.pings) < PING_DEADLINE_SECONDS, sorted(self.pings)[-5:]


def sleep_everywhere(urls: dict[str, str], seconds: float, count: int) -> SlowRun:
    """`count` invocations sleeping `seconds` on each stack at once; /ping on every stack
    every 0.2 s until they have all answered."""
    run = SlowRun({key: [] for key in urls})
    lock = threading.Lock()

    def invoke(key: str, url: str) -> None:
        started = time.monotonic()
        reply = requests.post(
            f"{url}/invocations",
            data=str(seconds),
            headers={"Content-Type": "application/x-sleep"},
            timeout=seconds + 120,
        )
        with lock:
            run.answers[key].append((reply.status_code, reply.content, time.monotonic() - started))

    callers = [
        threading.Thread(target=invoke, args=(key, url), daemon=True)
        for key, url in urls.items()
        for _ in range(count)
    ]
    for caller in callers:
        caller.start()
    while any(caller.is_alive() for caller in callers):
        for url in urls.values():
            started = time.monotonic()
            assert requests.get(f"{url}/ping", timeout=5).status_code == 200
            run.pings.append(time.monotonic() - started)
        time.sleep(0.2)
    return run
