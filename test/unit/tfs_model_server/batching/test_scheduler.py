"""batching.scheduler: SharedBatchScheduler queues and threads running BatchingSession batches."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pytest

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.batching.scheduler import (
    DEADLINE_WHILE_RUNNING,
    QUEUE_CLOSED,
    QUEUE_TIMEOUT,
    SCHEDULER_CLOSED,
    BatchQueue,
    SharedBatchScheduler,
)
from tfs_model_server.errors import Code, ServingError, invalid_argument

Arrays = Mapping[str, np.ndarray]


def echo_and_double(inputs: Arrays) -> dict[str, np.ndarray]:
    """Echo every input; add y = 2x when there is an x."""
    outputs = dict(inputs)
    if "x" in inputs:
        outputs["y"] = inputs["x"] * 2
    return outputs


class Model:
    """A run_batch that records batches; the first `hold` calls wait for release()."""

    def __init__(
        self,
        fn: Callable[[Arrays], Mapping[str, np.ndarray]] = echo_and_double,
        hold: int = 0,
        delay: float = 0.0,
    ) -> None:
        self.fn = fn
        self.hold = hold
        self.delay = delay
        self.batches: list[dict[str, np.ndarray]] = []
        self.started = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()

    @property
    def sizes(self) -> list[int]:
        return [len(next(iter(b.values()))) for b in self.batches]

    def release(self) -> None:
        self._released.set()

    def __call__(self, inputs: dict[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        with self._lock:
            self.batches.append(inputs)
            held = len(self.batches) <= self.hold
        if held:
            self.started.set()
            assert self._released.wait(10), "test never released the model"
        if self.delay:
            time.sleep(self.delay)
        return self.fn(inputs)


class Call(threading.Thread):
    """queue.run() on its own thread, keeping the result or the ServingError."""

    def __init__(self, queue: BatchQueue, inputs: Arrays, deadline: float | None = None) -> None:
        super().__init__(daemon=True)
        self.queue, self.inputs, self.deadline = queue, inputs, deadline
        self.result: dict[str, np.ndarray] | None = None
        self.error: ServingError | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.queue.run(self.inputs, self.deadline)
        except ServingError as e:
            self.error = e

    def outcome(self, timeout: float = 10.0) -> dict[str, np.ndarray]:
        self.join(timeout)
        assert not self.is_alive(), "caller still blocked"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.001)


def x(*rows: float) -> dict[str, np.ndarray]:
    return {"x": np.array(rows, dtype=np.float32).reshape(-1, 1)}


@pytest.fixture
def make_scheduler() -> Iterator[Callable[..., SharedBatchScheduler]]:
    schedulers: list[SharedBatchScheduler] = []

    def make(**options: object) -> SharedBatchScheduler:
        options.setdefault("num_batch_threads", 1)
        scheduler = SharedBatchScheduler(BatchingOptions(**options))  # type: ignore[arg-type]
        schedulers.append(scheduler)
        return scheduler

    yield make
    for scheduler in schedulers:
        scheduler.close(timeout=2)


def blocked_queue(
    make_scheduler: Callable[..., SharedBatchScheduler], model: Model, **options: object
) -> tuple[BatchQueue, Call]:
    """A queue whose single batch thread is busy with a held batch of one row."""
    queue = make_scheduler(**options).queue("model", model)
    blocker = Call(queue, x(-1))
    assert model.started.wait(5)
    return queue, blocker


def running_and_queued(
    make_scheduler: Callable[..., SharedBatchScheduler], model: Model
) -> tuple[SharedBatchScheduler, BatchQueue, Call, Call]:
    """A one-thread scheduler running x(1) (held by model) with x(2) queued behind it."""
    scheduler = make_scheduler()
    queue = scheduler.queue("m", model)
    running = Call(queue, x(1))
    assert model.started.wait(5)
    queued = Call(queue, x(2))
    wait_until(lambda: queue.num_enqueued_tasks() == 1)
    return scheduler, queue, running, queued


# tasks of up to 10 rows, split across batches of at most 4
SPLITTING = {
    "max_batch_size": 10,
    "enable_large_batch_splitting": True,
    "max_execution_batch_size": 4,
}


# --- merging and splitting under concurrency ------------------------------------------------


def test_concurrent_callers_get_exactly_their_rows(make_scheduler) -> None:
    model = Model(delay=0.002)
    queue = make_scheduler(num_batch_threads=2, max_batch_size=32, max_enqueued_batches=100).queue(
        "m", model
    )
    barrier = threading.Barrier(150)
    rng = random.Random(7)
    row_counts = [rng.randint(1, 5) for _ in range(150)]

    def inputs(i: int) -> dict[str, np.ndarray]:
        n = row_counts[i]
        return {
            "x": np.arange(n * 3, dtype=np.float32).reshape(n, 3) + 1000 * i,
            "caller": np.full(n, i),
            "name": np.array([f"caller-{i}-row-{r}".encode() for r in range(n)], dtype=object),
        }

    results: dict[int, dict[str, np.ndarray]] = {}

    def call(i: int) -> None:
        barrier.wait()
        results[i] = queue.run(inputs(i))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(150)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(results) == 150
    for i, out in results.items():
        sent = inputs(i)
        np.testing.assert_array_equal(out["y"], sent["x"] * 2)
        np.testing.assert_array_equal(out["caller"], sent["caller"])
        assert out["name"].tolist() == sent["name"].tolist()
    sizes = model.sizes
    assert sum(sizes) == sum(row_counts)
    assert max(sizes) <= 32
    assert max(sizes) > 5, "no batch merged more than one task"
    assert len(sizes) < 150


def test_merges_what_queued_while_threads_were_busy(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model, max_batch_size=8)
    calls = [Call(queue, x(i, i + 0.5)) for i in range(3)]
    wait_until(lambda: queue.num_enqueued_tasks() == 3)
    model.release()
    for i, call in enumerate(calls):
        np.testing.assert_array_equal(call.outcome()["y"], [[2 * i], [2 * i + 1]])
    blocker.outcome()
    assert model.sizes == [1, 6]


def test_max_batch_size_starts_a_new_batch(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model, max_batch_size=4)
    calls = [Call(queue, x(*range(3))) for _ in range(3)]
    wait_until(lambda: queue.num_enqueued_tasks() == 3)
    model.release()
    for call in calls:
        np.testing.assert_array_equal(call.outcome()["y"], [[0], [2], [4]])
    blocker.outcome()
    assert model.sizes == [1, 3, 3, 3]


def test_full_batch_starts_before_timeout(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler(max_batch_size=3, batch_timeout_micros=60_000_000).queue("m", model)
    first = Call(queue, x(1))
    wait_until(lambda: queue.num_enqueued_tasks() == 1)
    second = Call(queue, x(2, 3))
    assert first.outcome()["y"].tolist() == [[2]]
    assert second.outcome()["y"].tolist() == [[4], [6]]
    assert model.sizes == [3]


def test_timeout_collects_tasks_then_runs_partial_batch(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler(max_batch_size=100, batch_timeout_micros=300_000).queue("m", model)
    first = Call(queue, x(1))
    wait_until(lambda: queue.num_enqueued_tasks() == 1)
    second = Call(queue, x(2))
    assert first.outcome()["y"].tolist() == [[2]]
    assert second.outcome()["y"].tolist() == [[4]]
    assert model.sizes == [2]


def test_queues_are_per_key_and_share_the_threads(make_scheduler) -> None:
    scheduler = make_scheduler(num_batch_threads=2)
    double = scheduler.queue(("a", "serving_default"), Model())
    triple = scheduler.queue(("b", "serving_default"), Model(lambda i: {"y": i["x"] * 3}))
    assert scheduler.queue(("a", "serving_default"), Model()) is double
    calls = [Call(q, x(i)) for i in range(20) for q in (double, triple)]
    for i in range(20):
        assert calls[2 * i].outcome()["y"].tolist() == [[2 * i]]
        assert calls[2 * i + 1].outcome()["y"].tolist() == [[3 * i]]


def test_string_tensors(make_scheduler) -> None:
    def upper(inputs: Arrays) -> dict[str, np.ndarray]:
        s = inputs["s"]
        return {"u": np.array([v.upper() for v in s.ravel()], dtype=object).reshape(s.shape)}

    model = Model(upper, hold=1)
    queue = make_scheduler().queue("m", model)
    blocker = Call(queue, {"s": np.array([[b"z"]], dtype=object)})
    assert model.started.wait(5)
    a = Call(queue, {"s": np.array([[b"ab"], [b"cd"]], dtype=object)})
    b = Call(queue, {"s": np.array([[b"ef"]], dtype=object)})
    wait_until(lambda: queue.num_enqueued_tasks() == 2)
    model.release()
    assert a.outcome()["u"].tolist() == [[b"AB"], [b"CD"]]
    assert b.outcome()["u"].tolist() == [[b"EF"]]
    assert blocker.outcome()["u"].tolist() == [[b"Z"]]


# --- padding ---------------------------------------------------------------------------------


def test_allowed_batch_sizes_pad_with_first_row_of_last_task(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(
        make_scheduler, model, max_batch_size=8, allowed_batch_sizes=(2, 4, 8)
    )
    a = Call(queue, x(1, 2))
    b = Call(queue, x(3))
    wait_until(lambda: queue.num_enqueued_tasks() == 2)
    model.release()
    assert a.outcome()["y"].tolist() == [[2], [4]]
    assert b.outcome()["y"].tolist() == [[6]]
    blocker.outcome()
    assert model.sizes == [2, 4]  # 1 -> 2, 3 -> 4
    assert model.batches[0]["x"].ravel().tolist() == [-1, -1]
    assert model.batches[1]["x"].ravel().tolist() == [1, 2, 3, 3]


def test_allowed_batch_sizes_with_string_inputs(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler(max_batch_size=4, allowed_batch_sizes=(4,)).queue("m", model)
    out = queue.run({"s": np.array([b"a", b"b", b"c"], dtype=object)})
    assert out["s"].tolist() == [b"a", b"b", b"c"]
    assert model.batches[0]["s"].tolist() == [b"a", b"b", b"c", b"a"]


def test_pad_variable_length_inputs(make_scheduler) -> None:
    model = Model(hold=1)
    queue = make_scheduler(pad_variable_length_inputs=True).queue("m", model)
    blocker = Call(queue, {"x": np.zeros((1, 2), np.int32), "s": np.array([[b"q"]], object)})
    assert model.started.wait(5)
    a = Call(queue, {"x": np.array([[7, 8, 9]], np.int32), "s": np.array([[b"a"]], object)})
    b = Call(
        queue,
        {
            "x": np.arange(10, dtype=np.int32).reshape(2, 5),
            "s": np.array([[b"b", b"c"], [b"d", b"e"]], object),
        },
    )
    wait_until(lambda: queue.num_enqueued_tasks() == 2)
    model.release()
    assert a.outcome()["x"].tolist() == [[7, 8, 9, 7, 7]]
    assert a.outcome()["s"].tolist() == [[b"a", b"a"]]
    assert b.outcome()["x"].tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert blocker.outcome()["x"].shape == (1, 2)
    assert model.batches[1]["x"].shape == (3, 5)


def test_pad_variable_length_rejects_rank_above_six(make_scheduler) -> None:
    queue = make_scheduler(pad_variable_length_inputs=True).queue("m", Model())
    with pytest.raises(ServingError) as e:
        queue.run({"x": np.zeros((1,) * 7)})
    assert (e.value.code, e.value.message) == (
        Code.INVALID_ARGUMENT,
        "Only tensors with rank from 1 to 6 can be padded.",
    )


def test_unequal_shapes_without_padding_fail_the_batch(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model)
    a = Call(queue, {"x": np.zeros((1, 3), np.float32)})
    b = Call(queue, {"x": np.zeros((1, 5), np.float32)})
    wait_until(lambda: queue.num_enqueued_tasks() == 2)
    model.release()
    blocker.join(5)  # the blocker's own shape differs too, but it ran alone
    for call in (a, b):
        with pytest.raises(ServingError) as e:
            call.outcome()
        assert e.value.code == Code.FAILED_PRECONDITION
        assert e.value.message == (
            "Tensors with name 'x' from different tasks have different shapes and padding is "
            "turned off. Set pad_variable_length_inputs to true, or ensure that all tensors "
            "with the same name have equal dimensions starting with the first dim."
        )


# --- limits ------------------------------------------------------------------------------


def test_queue_full(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model, max_batch_size=2, max_enqueued_batches=1)
    waiting = Call(queue, x(1, 2))
    wait_until(lambda: queue.num_enqueued_tasks() == 1)
    with pytest.raises(ServingError) as e:
        queue.run(x(3))
    assert e.value.code == Code.UNAVAILABLE
    assert e.value.message == (
        "The batch scheduling queue to which this task was submitted is full; "
        "currently 1 batches enqueued and max_enqueued_batches is 1"
    )
    model.release()
    assert waiting.outcome()["y"].tolist() == [[2], [4]]
    blocker.outcome()


def test_task_larger_than_max_batch_size(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler(max_batch_size=4).queue("m", model)
    with pytest.raises(ServingError) as e:
        queue.run(x(*range(5)))
    assert (e.value.code, e.value.message) == (
        Code.INVALID_ARGUMENT,
        "Task size 5 is larger than maximum input batch size 4",
    )
    assert model.batches == []


def test_large_batch_splitting(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler(**SPLITTING).queue("m", model)
    out = queue.run(x(*range(10)))
    assert out["y"].ravel().tolist() == [2 * i for i in range(10)]
    assert model.sizes == [4, 4, 2]
    with pytest.raises(ServingError, match="Task size 11 is larger than maximum input batch"):
        queue.run(x(*range(11)))


def test_large_batch_splitting_fills_the_open_batch_first(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model, **SPLITTING)
    a = Call(queue, x(1, 2, 3))
    wait_until(lambda: queue.num_enqueued_tasks() == 1)
    b = Call(queue, x(*range(10, 16)))
    wait_until(lambda: queue.num_enqueued_tasks() == 4)  # a + 3 pieces of b
    model.release()
    assert a.outcome()["y"].ravel().tolist() == [2, 4, 6]
    assert b.outcome()["y"].ravel().tolist() == [2 * i for i in range(10, 16)]
    blocker.outcome()
    assert model.sizes == [1, 4, 4, 1]


def test_large_batch_splitting_capacity(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model, **SPLITTING, max_enqueued_batches=1)
    with pytest.raises(ServingError) as e:
        queue.run(x(*range(5)))
    assert e.value.code == Code.UNAVAILABLE
    assert e.value.message == (
        "The batch scheduling queue to which this task was submitted is full; task size is 5 "
        "but scheduling capacity is only 4 (num_enqueued_batches=1, max_enqueued_batches=1, "
        "open_batch_size=0, max_execution_batch_size=4)"
    )
    model.release()
    blocker.outcome()


# --- deadlines, errors, shutdown -------------------------------------------------------------


def test_deadline_while_queued_drops_the_task(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(make_scheduler, model)
    with pytest.raises(ServingError) as e:
        queue.run(x(42), deadline=time.monotonic() + 0.05)
    assert (e.value.code, e.value.message) == (Code.DEADLINE_EXCEEDED, QUEUE_TIMEOUT)
    assert queue.num_enqueued_tasks() == 0
    model.release()
    blocker.outcome()
    assert queue.run(x(1))["y"].tolist() == [[2]]
    assert [b["x"].ravel().tolist() for b in model.batches] == [[-1], [1]]


def test_deadline_while_running(make_scheduler) -> None:
    model = Model(hold=1)
    queue = make_scheduler().queue("m", model)
    started = time.monotonic()
    with pytest.raises(ServingError) as e:
        queue.run(x(1), deadline=time.monotonic() + 0.1)
    assert time.monotonic() - started < 5
    assert (e.value.code, e.value.message) == (
        Code.DEADLINE_EXCEEDED,
        DEADLINE_WHILE_RUNNING,
    )
    model.release()
    assert queue.run(x(2))["y"].tolist() == [[4]]


def test_deadline_already_past(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler().queue("m", model)
    with pytest.raises(ServingError) as e:
        queue.run(x(1), deadline=time.monotonic() - 1)
    assert e.value.code == Code.DEADLINE_EXCEEDED
    assert model.batches == []


def test_deadline_of_split_task_drops_its_queued_pieces(make_scheduler) -> None:
    model = Model(hold=1)
    queue, blocker = blocked_queue(
        make_scheduler, model, **{**SPLITTING, "max_execution_batch_size": 2}
    )
    with pytest.raises(ServingError, match="timeout exceeded"):
        queue.run(x(*range(7)), deadline=time.monotonic() + 0.05)
    assert queue.num_enqueued_tasks() == 0
    model.release()
    blocker.outcome()
    assert model.sizes == [1]


def test_run_batch_exception_reaches_every_task(make_scheduler) -> None:
    def boom(inputs: Arrays) -> dict[str, np.ndarray]:
        if inputs["x"][0, 0] >= 0:
            raise ValueError("boom")
        return echo_and_double(inputs)

    model = Model(boom, hold=1)
    queue, blocker = blocked_queue(make_scheduler, model)
    calls = [Call(queue, x(i)) for i in range(3)]
    wait_until(lambda: queue.num_enqueued_tasks() == 3)
    model.release()
    for call in calls:
        with pytest.raises(ServingError) as e:
            call.outcome()
        assert (e.value.code, e.value.message) == (Code.INTERNAL, "boom")
    blocker.outcome()
    assert model.sizes == [1, 3]


def test_run_batch_serving_error_passes_through(make_scheduler) -> None:
    def fail(inputs: Arrays) -> dict[str, np.ndarray]:
        raise invalid_argument("bad input")

    queue = make_scheduler().queue("m", fail)
    with pytest.raises(ServingError) as e:
        queue.run(x(1))
    assert (e.value.code, e.value.message) == (Code.INVALID_ARGUMENT, "bad input")


def test_output_check_fails_every_caller_of_the_batch(make_scheduler) -> None:
    queue = make_scheduler().queue("m", lambda inputs: {"y": np.zeros(3)})
    with pytest.raises(ServingError) as e:
        queue.run(x(1, 2))
    assert e.value.code == Code.FAILED_PRECONDITION


def test_input_check_fails_the_call_before_it_is_queued(make_scheduler) -> None:
    model = Model()
    queue = make_scheduler().queue("m", model)
    with pytest.raises(ServingError) as e:
        queue.run({"a": np.zeros(2), "b": np.zeros(3)})
    assert e.value.code == Code.INVALID_ARGUMENT
    assert queue.num_enqueued_tasks() == 0 and model.batches == []


def test_close_wakes_every_waiter(make_scheduler) -> None:
    model = Model(hold=1)
    scheduler, queue, running, queued = running_and_queued(make_scheduler, model)
    scheduler.close(timeout=0.1)
    for call in (running, queued):
        with pytest.raises(ServingError) as e:
            call.outcome(timeout=5)
        assert (e.value.code, e.value.message) == (Code.UNAVAILABLE, SCHEDULER_CLOSED)
    with pytest.raises(ServingError, match="shut down"):
        queue.run(x(3))
    with pytest.raises(ServingError, match="shut down"):
        scheduler.queue("other", model)
    model.release()


def test_remove_queue_drains_pending_tasks(make_scheduler) -> None:
    model = Model(hold=1)
    scheduler, queue, blocker, queued = running_and_queued(make_scheduler, model)
    removed: list[bool] = []
    remover = threading.Thread(target=lambda: removed.append(scheduler.remove_queue("m")))
    remover.start()
    wait_until(lambda: queue.closed)
    with pytest.raises(ServingError) as e:
        queue.run(x(3))
    assert (e.value.code, e.value.message) == (Code.UNAVAILABLE, QUEUE_CLOSED)
    model.release()
    remover.join(5)
    assert removed == [True]
    assert queued.outcome()["y"].tolist() == [[4]]
    assert blocker.outcome()["y"].tolist() == [[2]]
    fresh = scheduler.queue("m", model)
    assert fresh is not queue
    assert fresh.run(x(5))["y"].tolist() == [[10]]


def test_remove_queue_timeout_fails_what_is_still_queued(make_scheduler) -> None:
    model = Model(hold=1)
    scheduler, _queue, blocker, queued = running_and_queued(make_scheduler, model)
    assert scheduler.remove_queue("m", timeout=0.05) is False
    with pytest.raises(ServingError) as e:
        queued.outcome()
    assert (e.value.code, e.value.message) == (Code.UNAVAILABLE, QUEUE_CLOSED)
    model.release()
    assert blocker.outcome()["y"].tolist() == [[2]]
    assert scheduler.remove_queue("m") is True  # already gone


def test_close_ends_a_remove_queue_wait(make_scheduler) -> None:
    model = Model(hold=1)
    scheduler = make_scheduler()
    queue = scheduler.queue("m", model)
    blocker = Call(queue, x(1))
    assert model.started.wait(5)
    removed: list[bool] = []
    remover = threading.Thread(target=lambda: removed.append(scheduler.remove_queue("m")))
    remover.start()
    wait_until(lambda: queue.closed)
    scheduler.close(timeout=0.1)
    remover.join(5)
    assert removed == [False]
    with pytest.raises(ServingError, match="shut down"):
        blocker.outcome()
    model.release()
