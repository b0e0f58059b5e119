"""A TCP relay in front of PostgreSQL that can cut a connection on cue.

Used to put a connection loss at the worst moment for retry safety: after
the server has executed (and, in autocommit, committed) a statement, but
before its reply reaches the client. ``drop_reply(marker)`` arms it: the
next client message containing ``marker`` is forwarded, and the server's
answer to it is swallowed while both sockets are closed.
``drop_request(marker)`` cuts before the statement reaches the server.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttingProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._mode = ""
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_reply(self, marker: bytes) -> None:
        with self._lock:
            self._marker, self._mode = marker, "reply"

    def drop_request(self, marker: bytes) -> None:
        with self._lock:
            self._marker, self._mode = marker, "request"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            pair = _Pair(self, client, server)
            threading.Thread(target=pair.client_to_server, daemon=True).start()
            threading.Thread(target=pair.server_to_client, daemon=True).start()

    def _take(self, chunk: bytes) -> str:
        """The cut to make for this client chunk ('' for none); disarms."""
        with self._lock:
            if self._marker is not None and self._marker in chunk:
                mode, self._marker, self._mode = self._mode, None, ""
                self.cuts += 1
                return mode
        return ""


class _Pair:
    def __init__(self, proxy: CuttingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallow_reply = threading.Event()

    def _cut(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def client_to_server(self) -> None:
        try:
            while chunk := self.client.recv(65536):
                mode = self.proxy._take(chunk)
                if mode == "request":
                    self._cut()
                    return
                if mode == "reply":
                    self.swallow_reply.set()
                self.server.sendall(chunk)
        except OSError:
            pass
        self._cut()

    def server_to_client(self) -> None:
        try:
            while chunk := self.server.recv(65536):
                if self.swallow_reply.is_set():
                    # The server has answered: the statement ran to the end.
                    self._cut()
                    return
                self.client.sendall(chunk)
        except OSError:
            pass
        self._cut()
