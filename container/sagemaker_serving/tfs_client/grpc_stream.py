"""gRPC Predict with the request sent as it arrives: a large x-npy body (an asynchronous
endpoint's, up to 1 GiB) reaches the model server without ever being held whole here.

grpcio sends only a message it holds whole, and copies it once more into its core for the
whole call: a 1 GiB body would cost this process 2 GiB. Here the call is made over HTTP/2
with h2 instead: the gRPC length prefix and the PredictRequest up to the tensor's values go
first (their sizes are known from the body's Content-Length), then the body's chunks as DATA
frames, as the model server's flow-control window lets them.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator
from urllib.parse import unquote

from sagemaker_serving.errors import StatusError
from sagemaker_serving.tfs_client.errors import ModelServerTimeout, ModelServerUnavailable
from sagemaker_serving.tfs_client.grpc import status_error
from sagemaker_serving.tfs_client.wire import PREDICT_METHOD

_READ = 1 << 16


class BodyCut(StatusError):
    """The client's body ended before its Content-Length (the client went away)."""


async def predict(
    port: int, head: bytes, values: AsyncIterator[bytes], size: int, deadline: float
) -> bytes:
    """The serialized PredictResponse to `head` followed by the `size` bytes `values` yields
    (the request's last field's value), within the deadline. Each call is on an HTTP/2
    connection of its own: a body this large takes far longer than a loopback connection, and
    a connection kept idle could have been closed by a model server that restarted meanwhile
    (the call could not be tried again: its body has been read)."""
    timeout = deadline - time.monotonic()
    if timeout <= 0:
        raise ModelServerTimeout()
    connection = None
    try:
        async with asyncio.timeout(timeout):
            connection = _Connection(*await asyncio.open_connection("127.0.0.1", port))
            return await connection.call(head, values, size, timeout)
    except TimeoutError:
        raise ModelServerTimeout() from None
    except (OSError, EOFError, _Broken) as exc:
        raise ModelServerUnavailable(exc) from None
    finally:
        if connection is not None:
            connection.close()


class _Broken(Exception):
    """The HTTP/2 connection failed (a protocol error, or the peer ended it)."""


class _Connection:
    """One HTTP/2 connection to a model server's gRPC port, for one call."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h2.config
        import h2.connection

        self.reader, self.writer = reader, writer
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config)
        self.h2.initiate_connection()
        self._stream = 0
        self._headers: dict[str, str] = {}
        self._data = bytearray()
        self._ended = False

    def close(self) -> None:
        self.writer.close()

    async def call(
        self, head: bytes, values: AsyncIterator[bytes], size: int, timeout: float
    ) -> bytes:
        self._stream = stream = self.h2.get_next_available_stream_id()
        self.h2.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", PREDICT_METHOD),
                (":authority", "127.0.0.1"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", f"{max(1, int(timeout * 1000))}m"),
            ],
        )
        await self._send(b"\0" + struct.pack(">I", len(head) + size) + head)
        sent = 0
        async for chunk in values:
            if self._ended:  # answered (an error) before it read the whole request
                break
            sent += len(chunk)
            await self._send(chunk)
        if sent < size and not self._ended:
            raise BodyCut(f"The request body ended after {sent} of its {size} bytes", 400)
        if not self._ended:
            self.h2.end_stream(stream)
            await self._flush()
        while not self._ended:
            await self._receive()
        return self._answer()

    async def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._ended:
            window = min(
                self.h2.local_flow_control_window(self._stream), self.h2.max_outbound_frame_size
            )
            if window <= 0:
                await self._flush()
                await self._receive()
                continue
            self.h2.send_data(self._stream, bytes(view[:window]))
            view = view[window:]
        await self._flush()

    async def _flush(self) -> None:
        self.writer.write(self.h2.data_to_send())
        await self.writer.drain()

    async def _receive(self) -> None:
        import h2.events
        import h2.exceptions

        data = await self.reader.read(_READ)
        if not data:
            raise _Broken("the model server closed the connection")
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            raise _Broken(f"HTTP/2: {exc}") from None
        for event in events:
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                self._headers.update(dict(event.headers))  # type: ignore[arg-type]
            elif isinstance(event, h2.events.DataReceived):
                self._data += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self._ended = True
            elif isinstance(event, h2.events.StreamReset):
                if not self._ended:  # after the status (an early answer), the call is over
                    raise _Broken(
                        f"the model server reset the call (HTTP/2 error {event.error_code})"
                    )
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise _Broken("the model server ended the connection")
        await self._flush()

    def _answer(self) -> bytes:
        code = self._headers.get("grpc-status", "")
        if not code.isdigit():
            raise _Broken(f"the model server's answer has no gRPC status ({code!r})")
        if code != "0":
            raise status_error(int(code), unquote(self._headers.get("grpc-message", "")))
        if len(self._data) < 5 or self._data[0] != 0:
            raise _Broken("the model server's answer is not one uncompressed gRPC message")
        (length,) = struct.unpack(">I", self._data[1:5])
        if len(self._data) != 5 + length:
            raise _Broken("the model server's answer is not one whole gRPC message")
        return bytes(self._data[5:])
