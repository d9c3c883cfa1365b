"""A child forked inside a user function never comes back to the caller, and never holds the
caller's sockets."""

from __future__ import annotations

import os
import socket

import pytest

from sagemaker_serving.user_code import fork_guard


def _fork_and(then: str) -> int:
    pid = os.fork()
    if pid == 0 and then == "raise":
        raise RuntimeError("in the child")
    return pid


@pytest.mark.parametrize(("then", "code"), [("return", 0), ("raise", 1)])
def test_a_child_forked_in_the_function_ends_where_the_function_ends(then, code):
    pid = fork_guard.call(_fork_and, then)  # in the child this line is never passed
    assert pid > 0, "the forked child came back to the caller"
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == code


def test_children_close_the_sockets_named(tmp_path):
    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with listener, other:
        assert fork_guard.sockets_bound_to(path) == [listener.fileno()]
        fork_guard.close_in_children(lambda: fork_guard.sockets_bound_to(path))
        pid = os.fork()
        if pid == 0:  # the child: is the listener still open here?
            try:
                os.fstat(listener.fileno())
                os._exit(3)
            except OSError:
                os._exit(0 if other.fileno() >= 0 and os.fstat(other.fileno()) else 4)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        listener.getsockname()  # still open in this process
