"""What a process tree listens on: sampled from the kernel's socket table while it runs, since
Beam's and Spark's servers come and go with each job."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time

import psutil


class ListeningSockets:
    """A thread noting every listening TCP socket of root's process tree, until stopped."""

    def __init__(self, root_pid: int, every_s: float = 0.2) -> None:
        self.seen: set[tuple[str, str, int]] = set()  # (process name, address, port)
        self.command_of_port: dict[int, str] = {}  # for the failure message: which process
        self._root, self._every_s = root_pid, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ListeningSockets:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def not_on_loopback(self) -> str:
        """A line for each address listened on beyond loopback, with the command that did; ''."""
        return "\n".join(sorted(f"{address}:{port} {self.command_of_port.get(port, name)}"
                                 for name, address, port in self.seen
                                 if not ipaddress.ip_address(address).is_loopback and not _mapped_loopback(address)))

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._sample_once()
            time.sleep(self._every_s)
        self._sample_once()

    def _sample_once(self) -> None:
        try:
            root = psutil.Process(self._root)
            processes = {process.pid: process for process in [root, *root.children(recursive=True)]}
        except psutil.Error:
            return
        for connection in psutil.net_connections(kind="tcp"):
            process = processes.get(connection.pid) if connection.status == psutil.CONN_LISTEN else None
            if process is None:
                continue
            with contextlib.suppress(psutil.Error):
                self.seen.add((process.name(), connection.laddr.ip, connection.laddr.port))
                self.command_of_port[connection.laddr.port] = " ".join(process.cmdline())[-300:]


def _mapped_loopback(address: str) -> bool:
    mapped = ipaddress.ip_address(address)
    return isinstance(mapped, ipaddress.IPv6Address) and bool(mapped.ipv4_mapped) \
        and mapped.ipv4_mapped.is_loopback  # type: ignore[union-attr]


def wait_accepting(port: int, what: str, timeout_s: float = 120) -> None:
    """Until a loopback port accepts connections; fails naming what did not come up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{what} did not listen on {port} within {timeout_s:.0f} s")
