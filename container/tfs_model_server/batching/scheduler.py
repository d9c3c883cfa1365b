"""TF Serving's request batching: BatchingSession over a SharedBatchScheduler, in numpy.

One `SharedBatchScheduler` owns `num_batch_threads` threads shared by every queue. A
queue (one per servable, signature and input/output names) collects concurrent `run()`
calls into batches the way TF's `internal::Queue` does: a deque of batches whose tail is
open; a task that does not fit in the open batch closes it and starts a new one, and at
most `max_enqueued_batches` batches may wait. A free thread takes the front closed batch,
or the open one once it is full, its oldest task has waited `batch_timeout_micros`, or
the queue is closing. With a timeout of 0, tasks still batch under load: while every
thread is busy they pile up in the open batch, and the next free thread takes them all.

A batch runs as BatchingSession runs it: its inputs merged (batching.tensors), the model
run once, the outputs split back into the callers' rows. With `enable_large_batch_splitting`,
a task larger than the open batch's free room is split across batches of
`max_execution_batch_size` and its outputs reassembled.

Error texts are TF's (shared_batch_scheduler.h, batching_session.cc); the texts this port
adds (deadlines, shutdown) are marked.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping

import numpy as np

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.batching.tensors import merge_inputs, split_outputs, task_size
from tfs_model_server.errors import (
    ServingError,
    deadline_exceeded,
    internal,
    invalid_argument,
    unavailable,
)

log = logging.getLogger(__name__)

RunBatch = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]

# --- TF's texts -----------------------------------------------------------------------
QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"
_QUEUE_FULL = QUEUE_FULL + "; currently {num} batches enqueued and max_enqueued_batches is {max}"
_QUEUE_FULL_SPLIT = (
    QUEUE_FULL + "; task size is {size} but scheduling capacity is only {capacity}"
    " (num_enqueued_batches={num}, max_enqueued_batches={max}, open_batch_size={open},"
    " max_execution_batch_size={execution})"
)
_TASK_TOO_LARGE = "Task size {size} is larger than maximum input batch size {max}"
# batching_session.cc answers RESOURCE_EXHAUSTED with this text when every task of a
# batch timed out in the queue; here the caller's own deadline gives DEADLINE_EXCEEDED.
QUEUE_TIMEOUT = "Run() timeout exceeded while waiting in batching queue"
# --- This port's texts -----------------------------------------------------------------
DEADLINE_WHILE_RUNNING = "Deadline Exceeded"  # what gRPC itself reports
QUEUE_CLOSED = "The batch scheduling queue to which this task was submitted has been closed"
SCHEDULER_CLOSED = "The batch scheduler has been shut down"


# --- Tasks and batches ----------------------------------------------------------------

_QUEUED, _RUNNING, _DONE = 0, 1, 2


class _Task:
    """One caller's request, or one piece of a split request (then `parent` is set)."""

    __slots__ = (
        "batch",
        "deadline",
        "done",
        "error",
        "inputs",
        "outputs",
        "parent",
        "pending",
        "pieces",
        "size",
        "state",
    )

    def __init__(self, inputs: Mapping[str, np.ndarray], size: int, deadline: float | None) -> None:
        self.inputs = inputs
        self.size = size
        self.deadline = deadline
        self.state = _QUEUED
        self.outputs: dict[str, np.ndarray] | None = None
        self.error: ServingError | None = None
        self.batch: _Batch | None = None
        self.parent: _Task | None = None
        self.pieces: list[_Task] = []
        self.pending = 0
        self.done = threading.Lock()  # held until the task is finished
        self.done.acquire()

    def result(self) -> dict[str, np.ndarray]:
        """The finished task's outputs (pieces reassembled), or its error raised."""
        if self.error is not None:
            raise ServingError(self.error.code, self.error.message) from self.error.__cause__
        if not self.pieces:
            assert self.outputs is not None
            return self.outputs
        first = self.pieces[0].outputs
        assert first is not None
        return {
            name: np.concatenate([p.outputs[name] for p in self.pieces])  # type: ignore[index]
            for name in first
        }


class _Batch:
    __slots__ = ("owner", "size", "start", "tasks")

    def __init__(self, owner: BatchQueue) -> None:
        self.owner = owner
        self.tasks: list[_Task] = []
        self.size = 0
        self.start = 0.0  # when the first task entered (valid while non-empty)


# --- Queues and the scheduler ------------------------------------------------------------


class BatchQueue:
    """Batches the `run()` calls of one (servable, signature) and runs them on the pool."""

    def __init__(
        self,
        scheduler: SharedBatchScheduler,
        key: Hashable,
        run_batch: RunBatch,
        options: BatchingOptions,
    ) -> None:
        self.key = key
        self.options = options
        self._scheduler = scheduler
        self._run_batch = run_batch
        self._limit = options.max_batch_size
        self._execution = options.execution_batch_size
        self._capacity = options.queue_capacity
        self._timeout = options.batch_timeout_micros / 1e6
        self._batches: collections.deque[_Batch] = collections.deque([_Batch(self)])
        self._running: set[_Batch] = set()
        self._queued = 0  # tasks (pieces) waiting in _batches
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def num_enqueued_tasks(self) -> int:
        """Tasks (or pieces of split tasks) accepted but not yet running."""
        with self._scheduler._lock:
            return self._queued

    def run(
        self, inputs: Mapping[str, np.ndarray], deadline: float | None = None
    ) -> dict[str, np.ndarray]:
        """Run inputs as part of a batch; block until this call's own rows are ready.

        deadline is a time.monotonic() value; once it passes the call fails with
        DEADLINE_EXCEEDED, and is dropped from its batch if that has not started yet.
        """
        inputs = {k: v if isinstance(v, np.ndarray) else np.asarray(v) for k, v in inputs.items()}
        size = task_size(inputs)
        if size > self._limit:
            raise invalid_argument(_TASK_TOO_LARGE.format(size=size, max=self._limit))
        if deadline is not None and time.monotonic() >= deadline:
            raise deadline_exceeded(QUEUE_TIMEOUT)
        task = _Task(inputs, size, deadline)
        self._scheduler._submit(self, task)
        timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not task.done.acquire(timeout=timeout):
            self._scheduler._expire(task)
        return task.result()

    # The methods below run with the scheduler lock held.

    def _enqueue(self, task: _Task, now: float) -> bool:
        """Place task (or its pieces) in batches; True if a batch thread should look."""
        if self.options.enable_large_batch_splitting:
            pieces = self._split(task)
        else:
            self._check_room(task)
            pieces = [task]
        was_idle = not self._batches[-1].tasks and len(self._batches) == 1
        for piece in pieces:
            tail = self._batches[-1]
            if tail.size + piece.size > self._execution:
                tail = _Batch(self)
                self._batches.append(tail)
            if not tail.tasks:
                tail.start = now
            tail.tasks.append(piece)
            tail.size += piece.size
            piece.batch = tail
        self._queued += len(pieces)
        return was_idle or len(self._batches) > 1 or self._open_batch_ready(now)

    def _split(self, task: _Task) -> list[_Task]:
        """Check capacity and cut task to fill the open batch, then whole batches."""
        tail = self._batches[-1]
        capacity = (self._capacity - len(self._batches)) * self._execution + (
            self._execution - tail.size
        )
        if task.size > capacity:
            raise unavailable(
                _QUEUE_FULL_SPLIT.format(
                    size=task.size,
                    capacity=capacity,
                    num=len(self._batches),
                    max=self.options.max_enqueued_batches,
                    open=tail.size,
                    execution=self._execution,
                )
            )
        room = self._execution - tail.size
        if task.size <= room:
            return [task]
        sizes = [room] if room > 0 else []
        rest = task.size - room
        while rest > 0:
            sizes.append(min(rest, self._execution))
            rest -= sizes[-1]
        start = 0
        for size in sizes:
            inputs = {k: v[start : start + size] for k, v in task.inputs.items()}
            piece = _Task(inputs, size, task.deadline)
            piece.parent = task
            task.pieces.append(piece)
            start += size
        task.pending = len(task.pieces)
        return task.pieces

    def _check_room(self, task: _Task) -> None:
        """Without splitting, TF's loose check: fail only when a new batch is needed."""
        tail = self._batches[-1]
        if tail.size + task.size > self._limit and len(self._batches) >= self._capacity:
            raise unavailable(
                _QUEUE_FULL.format(num=len(self._batches), max=self.options.max_enqueued_batches)
            )

    def _open_batch_ready(self, now: float) -> bool:
        tail = self._batches[-1]
        return bool(tail.tasks) and (
            self._closed or tail.size >= self._execution or now >= tail.start + self._timeout
        )

    def _ready_at(self) -> float | None:
        """When the open batch will become schedulable by its timeout, if it has tasks."""
        tail = self._batches[-1]
        return tail.start + self._timeout if tail.tasks else None

    def _take(self, now: float) -> _Batch | None:
        """Hand out the front closed batch, closing the open one first if it is due."""
        while True:
            if len(self._batches) == 1:
                if not self._open_batch_ready(now):
                    return None
                self._batches.append(_Batch(self))
            batch = self._batches.popleft()
            if batch.tasks:
                self._queued -= len(batch.tasks)
                return batch

    def _remove(self, task: _Task) -> None:
        """Drop a queued task from its batch."""
        batch = task.batch
        assert batch is not None
        batch.tasks.remove(task)
        batch.size -= task.size
        self._queued -= 1
        if not batch.tasks and batch is not self._batches[-1]:
            self._batches.remove(batch)

    def _idle(self) -> bool:
        return not self._queued and not self._running


class SharedBatchScheduler:
    """One pool of num_batch_threads threads shared by all queues (all models/signatures).

    Threads serve the queues round-robin, one batch at a time, as TF's scheduler does.
    """

    def __init__(self, options: BatchingOptions | None = None) -> None:
        self.options = options or BatchingOptions()
        self.options.validate()
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # batch threads wait here
        self._drained = threading.Condition(self._lock)  # remove_queue() waits here
        self._by_key: dict[Hashable, BatchQueue] = {}
        self._queues: list[BatchQueue] = []  # live and draining queues, served round-robin
        self._next = 0
        self._queued = 0
        self._closed = False
        self._threads = [
            threading.Thread(
                target=self._thread_loop,
                name=f"{self.options.thread_pool_name}_{i}",
                daemon=True,
            )
            for i in range(self.options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> SharedBatchScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def queue(
        self, key: Hashable, run_batch: RunBatch, options: BatchingOptions | None = None
    ) -> BatchQueue:
        """The queue for key, created with run_batch (and options) if it does not exist.

        options overrides the scheduler's queue options (e.g. per-model batching params);
        its thread settings are ignored.
        """
        if options is not None:
            options.validate()
        with self._lock:
            if self._closed:
                raise unavailable(SCHEDULER_CLOSED)
            queue = self._by_key.get(key)
            if queue is None:
                queue = BatchQueue(self, key, run_batch, options or self.options)
                self._by_key[key] = queue
                self._queues.append(queue)
            return queue

    def remove_queue(self, key: Hashable, timeout: float | None = None) -> bool:
        """Close key's queue and wait for its tasks to finish (TF's queue destructor).

        Its open batch becomes schedulable at once and new `run()` calls fail. After
        timeout seconds (or on close()), tasks still queued fail with UNAVAILABLE;
        running batches keep their callers. Returns whether the queue drained.
        """
        with self._lock:
            queue = self._by_key.pop(key, None)
            if queue is None:
                return True
            queue._closed = True
            self._work.notify()
            self._drained.wait_for(lambda: queue._idle() or self._closed, timeout)
            drained = queue._idle()
            if not drained:
                self._fail_queued(queue, unavailable(QUEUE_CLOSED))
            self._reap()
            return drained

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the threads; every pending caller fails with UNAVAILABLE at once.

        Waits up to timeout seconds for running batches to return before giving up on
        joining their (daemon) threads.
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                error = unavailable(SCHEDULER_CLOSED)
                for queue in self._queues:
                    queue._closed = True
                    self._fail_queued(queue, error)
                    for batch in queue._running:
                        for task in batch.tasks:
                            self._finish(task, None, error)
                self._by_key.clear()
                self._queues.clear()
                self._work.notify_all()
                self._drained.notify_all()
        end = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(None if end is None else max(0.0, end - time.monotonic()))

    # --- caller side -------------------------------------------------------------------

    def _submit(self, queue: BatchQueue, task: _Task) -> None:
        with self._lock:
            if self._closed:
                raise unavailable(SCHEDULER_CLOSED)
            if queue._closed:
                raise unavailable(QUEUE_CLOSED)
            if queue._enqueue(task, time.monotonic()):
                self._work.notify()
            self._queued += len(task.pieces) or 1

    def _expire(self, task: _Task) -> None:
        """The caller's deadline passed: fail task and drop whatever has not started."""
        with self._lock:
            if task.state == _DONE:
                return
            parts = task.pieces or [task]
            started = any(p.state != _QUEUED for p in parts)
            message = DEADLINE_WHILE_RUNNING if started else QUEUE_TIMEOUT
            self._finish(task, None, deadline_exceeded(message))
            self._reap()

    # --- batch threads -----------------------------------------------------------------

    def _thread_loop(self) -> None:
        while True:
            with self._lock:
                picked = self._wait_for_batch()
            if picked is None:
                return
            self._process(*picked)

    def _wait_for_batch(self) -> tuple[BatchQueue, _Batch] | None:
        while not self._closed:
            now = time.monotonic()
            picked, wake_at = self._pick(now)
            if picked is not None:
                if self._queued:
                    self._work.notify()  # let an idle thread watch what is left
                return picked
            self._work.wait(None if wake_at is None else max(0.0, wake_at - now))
        return None

    def _pick(self, now: float) -> tuple[tuple[BatchQueue, _Batch] | None, float | None]:
        """Round-robin over the queues for a batch to run; else when to look again."""
        wake_at = None
        count = len(self._queues)
        for i in range(count):
            index = (self._next + i) % count
            queue = self._queues[index]
            batch = queue._take(now)
            while batch is not None:
                self._queued -= len(batch.tasks)
                if self._start(queue, batch, now):
                    self._next = index + 1
                    return (queue, batch), None
                batch = queue._take(now)
            ready_at = queue._ready_at()
            if ready_at is not None and (wake_at is None or ready_at < wake_at):
                wake_at = ready_at
        self._reap()
        return None, wake_at

    def _start(self, queue: BatchQueue, batch: _Batch, now: float) -> bool:
        """Mark batch running, failing tasks already past their deadline; any left?"""
        for task in batch.tasks:
            task.state = _RUNNING
            task.batch = None
        for task in batch.tasks:
            if task.deadline is not None and now >= task.deadline:
                self._finish(task, None, deadline_exceeded(QUEUE_TIMEOUT))
        batch.tasks = [t for t in batch.tasks if not _abandoned(t)]
        if not batch.tasks:
            return False
        queue._running.add(batch)
        return True

    def _process(self, queue: BatchQueue, batch: _Batch) -> None:
        tasks = batch.tasks
        results: list[dict[str, np.ndarray]] | None = None
        error: ServingError | None = internal("Batch processing was interrupted")
        try:
            merged, padded_size = merge_inputs(
                [t.inputs for t in tasks], [t.size for t in tasks], queue.options
            )
            outputs = queue._run_batch(merged)
            results = split_outputs(outputs, [t.size for t in tasks], padded_size)
            error = None
        except ServingError as e:
            error = e
        except Exception as e:
            log.debug("run_batch failed for %r", queue.key, exc_info=True)
            error = internal(str(e) or type(e).__name__)
            error.__cause__ = e
        finally:
            with self._lock:
                queue._running.discard(batch)
                for i, task in enumerate(tasks):
                    self._finish(task, None if results is None else results[i], error)
                self._reap()

    # --- bookkeeping (lock held) ---------------------------------------------------------

    def _finish(
        self, task: _Task, outputs: dict[str, np.ndarray] | None, error: ServingError | None
    ) -> None:
        """Record task's outcome once and wake its caller (or account a split piece)."""
        if task.state == _DONE:
            return
        if task.state == _QUEUED and task.batch is not None:
            self._dequeue(task)
        task.state = _DONE
        task.outputs = outputs
        task.error = error
        for piece in task.pieces:
            if piece.state == _QUEUED:
                self._dequeue(piece)
                piece.state = _DONE
        parent = task.parent
        if parent is None:
            task.done.release()
        elif parent.state != _DONE:
            parent.pending -= 1
            if error is not None:
                self._finish(parent, None, error)
            elif not parent.pending:
                parent.state = _DONE
                parent.done.release()

    def _dequeue(self, task: _Task) -> None:
        assert task.batch is not None
        task.batch.owner._remove(task)
        task.batch = None
        self._queued -= 1

    def _fail_queued(self, queue: BatchQueue, error: ServingError) -> None:
        for batch in list(queue._batches):
            for task in list(batch.tasks):
                self._finish(task.parent or task, None, error)

    def _reap(self) -> None:
        """Forget closed queues that have no work left; wake remove_queue() waiters."""
        idle = [q for q in self._queues if q._closed and q._idle()]
        if idle:
            self._queues = [q for q in self._queues if q not in idle]
            self._next = 0
            self._drained.notify_all()


def _abandoned(task: _Task) -> bool:
    """Finished already (expired or failed), or a piece of a request that is."""
    return task.state == _DONE or (task.parent is not None and task.parent.state == _DONE)
