"""HTTP to one container: wait for /ping, read /execution-parameters, POST /invocations with
retries. The retries are urllib3's `Retry` on the session's adapter for /invocations: 5xx,
429, connection errors and timeouts (while the answer's head is awaited), up to max_retries
times with exponential backoff and jitter; any other 4xx fails at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

log = logging.getLogger(__name__)

PING_TIMEOUT = 2.0  # SageMaker's per-request /ping timeout
WAIT_REPORT_SECONDS = 5.0  # while waiting for /ping: a line this often
RETRIED_STATUSES = frozenset({429, *range(500, 600)})
# urllib3's backoff: the first retry at once, then BACKOFF_FACTOR * 2**n s (1 s, 2 s, ...), at
# most BACKOFF_MAX, plus up to BACKOFF_JITTER s at random (concurrent retries do not stampede)
BACKOFF_FACTOR = 0.5
BACKOFF_JITTER = 0.5
BACKOFF_MAX = 20.0
CHUNK = 1024 * 1024


def retry_policy(max_retries: int) -> Retry:
    """/invocations' retries; the last answer is returned (and reported) when they run out."""
    return Retry(
        total=max_retries,
        allowed_methods=None,  # POST too
        status_forcelist=RETRIED_STATUSES,
        backoff_factor=BACKOFF_FACTOR,
        backoff_jitter=BACKOFF_JITTER,
        backoff_max=BACKOFF_MAX,
        raise_on_status=False,
        respect_retry_after_header=False,  # the waits stay bounded whatever a server says
    )


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

    def __init__(self, url: str, max_retries: int = 0):
        self.url = url.rstrip("/")
        self.max_retries = max_retries
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            adapter = HTTPAdapter(max_retries=retry_policy(self.max_retries))
            session.mount(f"{self.url}/invocations", adapter)
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
        self, body: bytes, headers: dict[str, str], timeout: float, chunked: bool = False
    ) -> Reply:
        """POST /invocations (`timeout` s per attempt); the answer's body when 200. Raises
        InvocationError: a 4xx, or the last failure once the retries ran out."""
        data: bytes | _Chunks = _Chunks(body) if chunked else body
        try:
            reply = self.session.post(
                f"{self.url}/invocations", data=data, headers=headers, timeout=timeout
            )
        except requests.RequestException as err:
            cause = err.args[0] if err.args else None
            if isinstance(cause, MaxRetryError):  # every attempt failed
                attempts = self.max_retries + 1
                reason = cause.reason or cause
                message = f"{type(reason).__name__}: {reason} (after {attempts} attempts)"
                raise InvocationError(message, None, attempts) from None
            raise InvocationError(f"{type(err).__name__}: {err}") from None  # reading the body
        retries = getattr(reply.raw, "retries", None)
        attempts = 1 + len(retries.history if retries is not None else ())
        if reply.status_code == 200:
            return Reply(reply.content, attempts)
        message = f"HTTP {reply.status_code}: {reply.text[:500].strip()}"
        if reply.status_code in RETRIED_STATUSES:
            message += f" (after {attempts} attempts)"
        raise InvocationError(message, reply.status_code, attempts)


class _Chunks:
    """A body requests sends with chunked transfer encoding, and sends whole again on a retry
    (each attempt iterates it anew; a generator would be empty the second time)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self.body), CHUNK):
            yield self.body[start : start + CHUNK]
