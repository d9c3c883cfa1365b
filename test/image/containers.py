"""Containers of the image under test, started as SageMaker starts them and always removed."""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from process_utils import free_port_range

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 300.0  # SageMaker allows 4 min to the first /ping 200; a loaded CI machine more
STOP_TIMEOUT = 30  # SageMaker's SIGTERM -> SIGKILL grace
PROCESSES = """
import glob, os
for path in glob.glob("/proc/[0-9]*/status"):
    fields = dict(line.split(":", 1) for line in open(path).read().splitlines() if ":" in line)
    if fields["Pid"].strip() != str(os.getpid()):
        print(fields["Pid"].strip(), fields["Name"].strip(), fields["Uid"].split()[0])
"""


def default_image() -> str:
    """The reference `make image` gives its cpu image (scripts/build.sh's tag)."""
    return subprocess.run(
        [str(REPO / "scripts" / "build.sh"), "--print-tags", "cpu"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def readable(path: Path) -> Path:
    """Model files readable by the image's non-root user (SageMaker's extracted tars are)."""
    for item in [path, *path.rglob("*")]:
        item.chmod(item.stat().st_mode | (0o555 if item.is_dir() else 0o444))
    return path


class Container:
    """`docker run IMAGE serve`: the model directory read-only at /opt/ml/model (or
    /opt/ml/models on a multi-model endpoint), the front port published on the loopback."""

    def __init__(
        self,
        engine: Any,
        image: str,
        model_dir: Path | None = None,
        *,
        env: dict[str, str] | None = None,
        mount_at: str = "/opt/ml/model",
        front_ports: tuple[int, ...] = (8080,),
        **options: Any,
    ) -> None:
        self.engine = engine
        self.ports: dict[int, int] = {}  # container port -> host port
        publish: dict[str, tuple[str, int]] = {}
        if options.get("network_mode") is None:
            for port in front_ports:
                host_port, _ = free_port_range(1)
                self.ports[port] = host_port
                publish[f"{port}/tcp"] = ("127.0.0.1", host_port)
        volumes = dict(options.pop("volumes", {}))
        if model_dir is not None:
            volumes[str(readable(model_dir))] = {"bind": mount_at, "mode": "ro"}
        self.exit_code: int | None = None
        self.container = engine.containers.run(
            image,
            ["serve"],
            detach=True,
            environment=env or {},
            ports=publish,
            volumes=volumes,
            **options,
        )

    @property
    def url(self) -> str:
        return self.url_of(next(iter(self.ports)))

    def url_of(self, container_port: int) -> str:
        return f"http://127.0.0.1:{self.ports[container_port]}"

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")

    def running(self) -> bool:
        self.container.reload()
        return self.container.status in ("created", "running")

    def wait_ready(self, timeout: float = START_TIMEOUT, url: str | None = None) -> None:
        """Until GET /ping answers 200; fails with the logs when the container exits first
        or the deadline passes."""
        target = url or self.url
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise AssertionError(f"the container exited:\n{self.logs()[-5000:]}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{target}/ping", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        raise AssertionError(f"/ping not 200 within {timeout:.0f}s:\n{self.logs()[-5000:]}")

    def wait_exit(self, timeout: float) -> int:
        """The exit code, once the container has stopped by itself within `timeout`."""
        result = self.container.wait(timeout=timeout)
        self.exit_code = int(result["StatusCode"])
        return self.exit_code

    def exec(self, *command: str, user: str = "") -> tuple[int, str]:
        result = self.container.exec_run(list(command), user=user)
        return result.exit_code, result.output.decode(errors="replace")

    def stop(self, timeout: int = STOP_TIMEOUT) -> int:
        """SIGTERM, SIGKILL after `timeout` s (as SageMaker); the exit code."""
        if self.exit_code is None:
            self.container.stop(timeout=timeout)
            self.exit_code = self.wait_exit(timeout + 30)
        return self.exit_code

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def processes(self) -> list[tuple[str, str, str]]:
        """(pid, name, real uid) of every process in the container, from /proc (no ps)."""
        code, output = self.exec("python3", "-c", PROCESSES)
        assert code == 0, output
        return [tuple(line.split()) for line in output.splitlines()]  # type: ignore[misc]

    def listening(self) -> list[tuple[str, str, int]]:
        """(protocol, address, port) of every socket listening in the container, from `ss`."""
        code, output = self.exec("ss", "-H", "-l", "-n", "-t", "-u")
        assert code == 0, output
        found = []
        for line in output.splitlines():
            fields = line.split()
            address, _, port = fields[4].rpartition(":")
            address = address.strip("[]").split("%")[0]
            found.append((fields[0], "::" if address == "*" else address, int(port)))
        return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


@contextlib.contextmanager
def running(
    engine: Any, image: str, model_dir: Path | None = None, *, ready: bool = True, **kwargs: Any
) -> Iterator[Container]:
    """A container for the duration of the block (healthy first when `ready`), always removed."""
    container = Container(engine, image, model_dir, **kwargs)
    try:
        if ready:
            container.wait_ready()
        yield container
    finally:
        container.remove()
