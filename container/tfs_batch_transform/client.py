"""HTTP to one container: wait for /ping, read /execution-parameters, POST /invocations with
retries (5xx, 429, connection errors and timeouts; exponential backoff; 4xx fails at once)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import requests

log = logging.getLogger(__name__)

PING_TIMEOUT = 2.0  # SageMaker's per-request /ping timeout
WAIT_REPORT_SECONDS = 5.0  # while waiting for /ping: a line this often
BACKOFF_BASE = 0.5
BACKOFF_CAP = 20.0
CHUNK = 1024 * 1024


class InvocationError(RuntimeError):
    """A request that failed for good: a 4xx, or a 5xx/connection error after all retries."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


@dataclass(frozen=True)
class Reply:
    body: bytes
    attempts: int


class Endpoint:
    """One container URL; thread-safe (one keep-alive session per thread)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def wait_healthy(self, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
        """Block until GET /ping answers 200, saying what it waits for every
        WAIT_REPORT_SECONDS; TimeoutError after `timeout` seconds."""
        started = time.monotonic()
        deadline = started + timeout
        report_at = started + WAIT_REPORT_SECONDS
        last = "no answer"
        while time.monotonic() < deadline:
            if not alive():
                raise RuntimeError(f"{self.url}: the container exited before /ping answered 200")
            try:
                reply = self.session.get(f"{self.url}/ping", timeout=PING_TIMEOUT)
                if reply.status_code == 200:
                    return
                last = f"HTTP {reply.status_code}"
            except requests.RequestException as err:
                last = type(err).__name__
            now = time.monotonic()
            if now >= report_at:
                log.info(
                    "waiting for %s/ping to answer 200 (%s): %.0f s of --startup-timeout %.0f",
                    self.url, last, now - started, timeout,
                )  # fmt: skip
                report_at = now + WAIT_REPORT_SECONDS
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        raise TimeoutError(f"{self.url}/ping did not answer 200 within {timeout:.0f} s ({last})")

    def execution_parameters(self) -> dict:
        """GET /execution-parameters; {} unless it answers 200 with a JSON object."""
        try:
            reply = self.session.get(f"{self.url}/execution-parameters", timeout=PING_TIMEOUT * 5)
            if reply.status_code == 200:
                doc = reply.json()
                return doc if isinstance(doc, dict) else {}
        except (requests.RequestException, ValueError) as err:
            log.info("%s/execution-parameters: %s", self.url, err)
        return {}

    def invoke(
        self,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
        max_retries: int,
        chunked: bool = False,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """POST /invocations; the answer's body when 200. Raises InvocationError (also when
        `cancel` is set while waiting to retry)."""
        attempts = 0
        while True:
            attempts += 1
            data: bytes | Iterator[bytes] = _chunks(body) if chunked else body
            try:
                reply = self.session.post(
                    f"{self.url}/invocations", data=data, headers=headers, timeout=timeout
                )
            except requests.RequestException as err:
                status, message = None, f"{type(err).__name__}: {err}"
            else:
                if reply.status_code == 200:
                    return Reply(reply.content, attempts)
                status = reply.status_code
                message = f"HTTP {status}: {reply.text[:500].strip()}"
                if 400 <= status < 500 and status != 429:
                    raise InvocationError(message, status, attempts)
            if attempts > max_retries:
                raise InvocationError(f"{message} (after {attempts} attempts)", status, attempts)
            delay = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempts - 1))
            delay *= random.uniform(0.5, 1.0)  # jitter: concurrent retries do not stampede
            log.warning(
                "%s/invocations: %s; retry %d in %.1f s", self.url, message, attempts, delay
            )
            if cancel is not None and cancel.wait(delay):
                raise InvocationError(f"{message} (cancelled)", status, attempts)
            if cancel is None:
                time.sleep(delay)


def _chunks(body: bytes) -> Iterator[bytes]:
    """A generator body, so requests sends it with chunked transfer encoding."""
    for start in range(0, len(body), CHUNK):
        yield body[start : start + CHUNK]
