"""HTTP clients for the hop to the model server: ours (tfs_client's asyncio pool) against
httpx.AsyncClient and aiohttp.ClientSession, measured in one run on this machine.

One model server (tfs-model-server, half_plus_three) on a free loopback port; one asyncio event
loop in this process makes every request, as a gunicorn/uvicorn worker of the service does. Each
point is `concurrency` tasks sending a REST predict (`{"instances": [1.0, 2.0, 5.0]}`) back to
back on one kept-alive pool for `--seconds`, under one deadline per request (asyncio.timeout_at,
as the service bounds the hop). The points are interleaved: each round runs every client at
c=16 and c=1, in an order that rotates from round to round, so that every client sees the same
machine. A client's figure is the median of its rounds; a ratio (ours over the library with the
most requests/s) is the median of the rounds' ratios, each of two points run seconds apart.

Besides requests/s and p50 it reports this process's CPU time per request (the client's cost:
the model server runs in another process).

The candidates are not dependencies of the project: install them in the venv to measure
(`.venv/bin/pip install httpx aiohttp sniffio`); a client that is missing is skipped and said
so. Without sniffio, httpcore (httpx's transport) tries to import it on every request.

    .venv/bin/python test/perf/bench_http_clients.py [--seconds 2] [--rounds 9]
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[0] / "support"))  # example_models, model_server_process

from loadgen import bench_arguments, new_report, write_report  # noqa: E402

import example_models as em  # noqa: E402
from model_server_process import ModelServerProcess  # noqa: E402

OUR_SERVER = str(Path(sys.executable).parent / "tfs-model-server")
MODEL = "half_plus_three"
PATH = f"/v1/models/{MODEL}:predict"
BODY = json.dumps({"instances": [1.0, 2.0, 5.0]}).encode()
EXPECTED = {"predictions": [3.5, 4.0, 5.5]}
HEADERS = {"Content-Type": "application/json"}
CONCURRENCY = (16, 1)
POOL = 32  # idle keep-alive connections kept, as the service's pool (rest.POOL_SIZE)
DEADLINE_SECONDS = 30.0
WARMUP = 20  # requests per task before a point's clock starts


class Candidate:
    """One client: `open` makes its pool on the running loop, `send` one request."""

    name = ""

    async def open(self, port: int) -> None: ...

    async def send(self, deadline: float) -> bytes:
        raise NotImplementedError

    async def close(self) -> None: ...


class Ours(Candidate):
    """tfs_client's asyncio pool, as RestClient.arequest uses it."""

    name = "ours"

    async def open(self, port: int) -> None:
        from sagemaker_serving.tfs_client.http11 import ConnectionPool

        self.pool = ConnectionPool("127.0.0.1", port, POOL)

    async def send(self, deadline: float) -> bytes:
        answer = await self.pool.exchange("POST", PATH, BODY, HEADERS, deadline)
        if answer.status != 200:
            raise RuntimeError(f"{answer.status} {answer.body[:200]!r}")
        return answer.body

    async def close(self) -> None:
        self.pool.close()


class Httpx(Candidate):
    """httpx.AsyncClient, HTTP/1.1 on its keep-alive pool (no proxy from the environment)."""

    name = "httpx"

    async def open(self, port: int) -> None:
        import httpx

        limits = httpx.Limits(max_connections=None, max_keepalive_connections=POOL)
        self.client = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=None, trust_env=False
        )

    async def send(self, deadline: float) -> bytes:
        async with asyncio.timeout_at(deadline):
            reply = await self.client.post(PATH, content=BODY, headers=HEADERS)
        if reply.status_code != 200:
            raise RuntimeError(f"{reply.status_code} {reply.content[:200]!r}")
        return reply.content

    async def close(self) -> None:
        await self.client.aclose()


class Aiohttp(Candidate):
    """aiohttp.ClientSession on its TCPConnector's keep-alive pool."""

    name = "aiohttp"

    async def open(self, port: int) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        self.session = aiohttp.ClientSession(
            f"http://127.0.0.1:{port}",
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )

    async def send(self, deadline: float) -> bytes:
        async with asyncio.timeout_at(deadline):
            async with self.session.post(PATH, data=BODY, headers=HEADERS) as reply:
                body = await reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{reply.status} {body[:200]!r}")
        return body

    async def close(self) -> None:
        await self.session.close()


CANDIDATES: dict[str, type[Candidate]] = {"ours": Ours, "httpx": Httpx, "aiohttp": Aiohttp}


async def point(client: Candidate, concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` tasks sending back to back for `seconds`, each after its warm-up."""
    loop = asyncio.get_running_loop()
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors = [0] * concurrency
    warm = asyncio.Semaphore(0)
    go = asyncio.Event()
    stop_at = float("inf")

    async def task(i: int) -> None:
        for _ in range(WARMUP):
            body = await client.send(loop.time() + DEADLINE_SECONDS)
        if json.loads(body) != EXPECTED:
            raise RuntimeError(f"{client.name} read {body[:200]!r}")
        warm.release()
        await go.wait()
        mine = latencies[i]
        while (started := time.perf_counter()) < stop_at:
            try:
                await client.send(loop.time() + DEADLINE_SECONDS)
            except Exception:
                errors[i] += 1
                continue
            mine.append(time.perf_counter() - started)

    tasks = [asyncio.create_task(task(i)) for i in range(concurrency)]
    async with asyncio.timeout(60):
        for _ in range(concurrency):
            await warm.acquire()
    cpu, began = time.process_time(), time.perf_counter()
    stop_at = began + seconds
    go.set()
    await asyncio.gather(*tasks)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    flat = sorted(x for per in latencies for x in per)
    count = len(flat)
    return {
        "client": client.name,
        "concurrency": concurrency,
        "requests": count,
        "errors": sum(errors),
        "seconds": round(elapsed, 3),
        "rps": round(count / elapsed, 1),
        "p50_ms": round(statistics.median(flat) * 1000, 3) if count else None,
        "p99_ms": round(flat[int(0.99 * (count - 1))] * 1000, 3) if count else None,
        "client_cpu_ms_per_request": round(cpu * 1000 / count, 4) if count else None,
        "load_1min": round(os.getloadavg()[0], 2),
    }


async def run_rounds(names: list[str], port: int, rounds: int, seconds: float) -> list[dict]:
    """Every client at every concurrency, `rounds` times, the clients' order rotating."""
    clients = [CANDIDATES[name]() for name in names]
    for client in clients:
        await client.open(port)
    points: list[dict] = []
    try:
        for number in range(rounds):
            shift = number % len(clients)
            order = clients[shift:] + clients[:shift]
            for concurrency in CONCURRENCY:
                for client in order:
                    result = await point(client, concurrency, seconds)
                    result["round"] = number + 1
                    points.append(result)
                    print(
                        f"round {number + 1}  c={concurrency:>2}  {client.name:<8} "
                        f"{result['rps']:>8.1f} req/s  p50 {result['p50_ms']:6.3f} ms  "
                        f"client CPU {result['client_cpu_ms_per_request']:.3f} ms/req  "
                        f"errors {result['errors']}  load {result['load_1min']}",
                        flush=True,
                    )
    finally:
        for client in clients:
            await client.close()
    return points


def summary(points: list[dict], names: list[str]) -> dict[str, Any]:
    """Per client and concurrency, the medians over rounds; ours against the best library."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        for concurrency in CONCURRENCY:
            mine = [p for p in points if p["client"] == name and p["concurrency"] == concurrency]
            table.setdefault(name, {})[f"c{concurrency}"] = {
                field: round(statistics.median(p[field] for p in mine), 4)
                for field in ("rps", "p50_ms", "p99_ms", "client_cpu_ms_per_request")
            } | {"errors": sum(p["errors"] for p in mine), "rounds": len(mine)}
    verdict: dict[str, Any] = {}
    libraries = [name for name in names if name != "ours"]
    if "ours" in names and libraries:
        for concurrency in CONCURRENCY:
            key = f"c{concurrency}"
            best = max(libraries, key=lambda name: table[name][key]["rps"])
            rps = _paired(points, concurrency, best, "rps")
            p50 = _paired(points, concurrency, best, "p50_ms")
            verdict[key] = {
                "best_library": best,
                "ours_rps_over_best_per_round": rps,
                "ours_rps_over_best": round(statistics.median(rps), 3),
                "best_p50_over_ours": round(1 / statistics.median(p50), 3),
            }
        verdict["ours_10pct_faster_at_both"] = all(
            verdict[f"c{c}"]["ours_rps_over_best"] >= 1.10 for c in CONCURRENCY
        )
    return {"table": table, "verdict": verdict}


def _paired(points: list[dict], concurrency: int, other: str, field: str) -> list[float]:
    """Ours over `other` in `field`, round by round (the two ran a few seconds apart)."""
    by_round: dict[int, dict[str, float]] = {}
    for p in points:
        if p["concurrency"] == concurrency and p["client"] in ("ours", other):
            by_round.setdefault(p["round"], {})[p["client"]] = p[field]
    return [round(r["ours"] / r[other], 3) for _, r in sorted(by_round.items()) if len(r) == 2]


def print_summary(result: dict[str, Any], rounds: int) -> None:
    print(f"\nmedians of {rounds} interleaved rounds (one model server, one event loop):")
    print(f"{'client':<8} {'c':>3} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>11}")
    for name, per in result["table"].items():
        for key, row in per.items():
            print(
                f"{name:<8} {key[1:]:>3} {row['rps']:>9.1f} {row['p50_ms']:>8.3f} "
                f"{row['p99_ms']:>8.3f} {row['client_cpu_ms_per_request']:>11.3f}"
                + (f"  ({row['errors']} errors)" if row["errors"] else "")
            )
    verdict = result["verdict"]
    for concurrency in CONCURRENCY:
        v = verdict.get(f"c{concurrency}")
        if v:
            print(
                f"c={concurrency:>2}: ours/{v['best_library']} requests/s "
                f"{v['ours_rps_over_best']:.3f} (median of the rounds' ratios "
                f"{v['ours_rps_over_best_per_round']}), {v['best_library']}/ours p50 "
                f"{v['best_p50_over_ours']:.3f}"
            )
    if verdict:
        print(
            "ours at least 10 % faster than the best library at both c=16 and c=1: "
            f"{'yes' if verdict['ours_10pct_faster_at_both'] else 'no'}"
        )


def other_benchmarks() -> list[str]:
    """Other benchmark or load processes on the machine (they would skew every figure)."""
    found = subprocess.run(
        ["pgrep", "-fa", "perf_report|bench_|wrk"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    mine = {str(os.getpid()), str(os.getppid())}  # this run (and a `timeout` around it)
    return [line for line in found if line.split(" ", 1)[0] not in mine]


def main() -> None:
    parser = bench_arguments(__doc__, "http_clients", seconds=2.0)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--clients", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    args = parser.parse_args()
    names = [name for name in args.clients if name == "ours" or importlib.util.find_spec(name)]
    for name in set(args.clients) - set(names):
        print(f"{name} is not installed: skipped (.venv/bin/pip install {name})")
    others = other_benchmarks()
    if others:
        print("other benchmarks are running (the figures are skewed):\n  " + "\n  ".join(others))
    sniffio = importlib.util.find_spec("sniffio") is not None
    if "httpx" in names and not sniffio:
        print("sniffio is not installed: httpcore tries to import it on every httpx request")
    report = new_report(
        clients=names,
        sniffio_installed=sniffio,
        rounds=args.rounds,
        seconds=args.seconds,
        concurrency=list(CONCURRENCY),
        load_at_start=[round(x, 2) for x in os.getloadavg()],
        other_benchmarks_at_start=others,
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        em.half_plus_three_tf1(root / MODEL, versions=(1,))
        server = ModelServerProcess(
            [f"--model_base_path={root / MODEL}", f"--model_name={MODEL}"],
            root / "model-server.log",
            executable=OUR_SERVER,
        ).start()
        try:
            if not server.wait_ready([MODEL], 180):
                raise SystemExit(f"the model server did not start:\n{server.log()[-2000:]}")
            points = asyncio.run(run_rounds(names, server.rest_port, args.rounds, args.seconds))
        finally:
            server.stop()
    result = summary(points, names)
    report |= result
    report["points"] = points
    report["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["other_benchmarks_at_end"] = other_benchmarks()
    print_summary(result, args.rounds)
    print(f"load average at start {report['load_at_start']}, at end {report['load_at_end']}")
    write_report(report, args.out)


if __name__ == "__main__":
    main()
