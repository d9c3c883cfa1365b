"""The hostile-input harness reads one answer per case, even when two arrive in one read."""

from __future__ import annotations

import socket
import threading

import hostile_cases


def test_send_keeps_the_first_answer_when_a_second_one_follows_at_once():
    first = b'{"error": "Unsupported Media Type"}\n'
    second = b'{"error": "Bad Request"}\n'
    both = (
        b"HTTP/1.1 415 Unsupported Media Type\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s"
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
    ) % (len(first), first, len(second), second)
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(both)  # one write: the client reads both in one recv

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        answer = hostile_cases.send(
            listener.getsockname()[1], b"POST / HTTP/1.1\r\n\n\r\nX: y\r\n\r\n"
        )
        thread.join(5)
    assert answer.status == 415 and answer.body == first
