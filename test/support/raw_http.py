"""Raw HTTP/1.1 exchanges on a socket, for requests no client library sends as they are."""

from __future__ import annotations

import re
import socket


def raw(port: int, data: bytes, timeout: float = 10.0, source: str = "127.0.0.1") -> bytes:
    """Send raw bytes; read one answer (to its Content-Length), or until the server closes."""
    address = ("127.0.0.1", port)
    with socket.create_connection(address, timeout=timeout, source_address=(source, 0)) as sock:
        sock.sendall(data)
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
                head, sep, body = reply.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if sep and length and len(body) >= int(length[1]):
                    break
        except (TimeoutError, ConnectionResetError):
            pass
    return reply


def split_reply(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of one answer."""
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunked(body)
    return status, headers, body


def dechunked(data: bytes) -> bytes:
    """The payload of a body in chunked transfer coding (AssertionError when it is cut short)."""
    payload, rest = b"", data
    while True:
        size_line, sep, rest = rest.partition(b"\r\n")
        assert sep, f"chunked body cut short: {data[-200:]!r}"
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return payload
        payload, rest = payload + rest[:size], rest[size + 2 :]


def chunked(body: bytes, step: int = 65536) -> bytes:
    """`body` in chunked transfer coding, `step` bytes a chunk, as a streaming client sends it."""
    pieces = [b"%x\r\n%s\r\n" % (len(body[i : i + step]), body[i : i + step])
              for i in range(0, len(body), step)]  # fmt: skip
    return b"".join(pieces) + b"0\r\n\r\n"


def chunked_post(target: str, body: bytes, content_type: str, step: int = 65536) -> bytes:
    """A whole POST of `body` in chunks of `step` bytes (Connection: close)."""
    head = (
        f"POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + chunked(body, step)


def padded_tfs_request(size: int) -> bytes:
    """`{"instances": [1.0, 2.0]}` padded with spaces to `size` bytes (cheap for any parser)."""
    start = b'{"instances": [1.0, 2.0]}'
    return start + b" " * (size - len(start))
