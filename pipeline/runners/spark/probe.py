"""Whether a port speaks Spark's RPC protocol, before Beam's job server spends a minute and
a page of Java on it. Spark answers any RPC request it cannot read with an RpcFailure frame
(network-common: an 8-byte frame length, a message-type byte); an HTTP server (the master's
web UI port, given by mistake), SSH or a database answers something else.
"""

from __future__ import annotations

import socket
import struct

# A frame: its length (8 bytes, counting itself), the message type, then the message.
_RPC_REQUEST, _RPC_RESPONSE, _RPC_FAILURE = 3, 4, 5
_REQUEST_ID = 1
# An RPC request with an empty body; the line ends after it make a line-based server (HTTP)
# answer too, while Spark answers the frame and waits for the rest of a next one.
_EMPTY_REQUEST = struct.pack(">qbqi", 8 + 1 + 8 + 4, _RPC_REQUEST, _REQUEST_ID, 0) + b"\r\n\r\n"


def foreign_answer(host: str, port: int, timeout_s: float) -> str | None:
    """What the port said when it is not Spark's RPC (its first line, printable); None when it
    answered as Spark does, or said nothing to go by (closed, silent: left to Spark to judge)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(_EMPTY_REQUEST)
            answer = _read_up_to(connection, 9)
            if not answer or _spark_frame(answer):
                return None
            answer += _read_up_to(connection, 80 - len(answer))
    except OSError:
        return None
    line = answer.split(b"\n")[0].strip()[:80]
    return line.decode("ascii") if line and line.isascii() and line.decode("ascii").isprintable() \
        else f"{len(answer)} bytes, not a Spark frame"


def _spark_frame(header: bytes) -> bool:
    if len(header) < 9:
        return False
    length, kind = struct.unpack(">qb", header[:9])
    return kind in (_RPC_RESPONSE, _RPC_FAILURE) and 9 < length < 1 << 24


def _read_up_to(connection: socket.socket, size: int) -> bytes:
    """Up to size bytes: fewer when the peer closes or goes quiet."""
    received = b""
    while len(received) < size:
        try:
            chunk = connection.recv(size - len(received))
        except TimeoutError:
            break
        if not chunk:
            break
        received += chunk
    return received
