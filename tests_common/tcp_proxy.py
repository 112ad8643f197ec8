"""A TCP proxy in front of a shared server that a test can cut, so a destination "restarts" mid-delivery
without touching the server other tests (and other helpers' runs) use.

``cut_after_bytes=N``: once N bytes went from clients to the server, every open connection is dropped
(the client sees its connection die mid-transaction, as on a server restart) and new connections are
accepted and closed at once for ``down_for`` seconds (the client sees "server closed the connection"),
then it forwards again."""

from __future__ import annotations

import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, cut_after_bytes: int | None = None,
                 down_for: float = 1.0):
        self.target = (target_host, target_port)
        self.cut_after_bytes, self.down_for = cut_after_bytes, down_for
        self.forwarded = 0
        self.cuts = 0
        self.down_until = 0.0
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self.down_until:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if counted:
                    self._count(len(data))
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _count(self, n: int) -> None:
        with self.lock:
            self.forwarded += n
            if self.cut_after_bytes is None or self.forwarded < self.cut_after_bytes:
                return
            self.cut_after_bytes = None  # one cut
            self.cuts += 1
            self.down_until = time.monotonic() + self.down_for
            doomed, self.sockets = self.sockets, []
        for s in doomed:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        with self.lock:
            doomed, self.sockets = self.sockets, []
        for s in doomed:
            s.close()
