"""Misbehaving SSH endpoints on 127.0.0.1 for the robustness suite (run as a script; prints one
JSON line {mode: port} and serves until killed):

- ``garbage``: accepts TCP and answers an HTTP error (not SSH);
- ``silent``: accepts TCP and says nothing;
- ``close``: accepts TCP and closes at once;
- ``closed``: a port nothing listens on;
- ``ssh``: a real SSH server (paramiko's server side) that refuses every authentication; its
  host key is written to ``<dir>/host_key.pub`` (argv[1]) for known_hosts tests;
- ``mute``: a real SSH server that lets any key in and takes every command, then never answers
  it (a host gone silent in the middle of a run: frozen, its network cut after the login).

Each accepted connection adds a line to ``<dir>/accepted-MODE``; each ``silent`` connection, once
the client closed it (or after 120 s), adds the seconds it was open to ``<dir>/held-silent``.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import paramiko


class _TakeAll(paramiko.ServerInterface):
    """Any public key logs in; every session and command is accepted (and never run); each
    command adds a line to ``<dir>/commands-mute`` (tests wait for one in flight)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        with open(self.folder / "commands-mute", "a") as log:
            log.write("1\n")
        return True

    def check_channel_pty_request(self, *args: object) -> bool:
        return True

    def check_channel_shell_request(self, channel: paramiko.Channel) -> bool:
        return True


class _DenyAll(paramiko.ServerInterface):
    def get_allowed_auths(self, username: str) -> str:
        return "publickey,password"

    def check_auth_password(self, username: str, password: str) -> int:
        return paramiko.AUTH_FAILED

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_FAILED

    def check_auth_none(self, username: str) -> int:
        return paramiko.AUTH_FAILED


def _serve(sock: socket.socket, mode: str, key: paramiko.PKey, folder: Path) -> None:
    while True:
        conn, _ = sock.accept()
        with open(folder / f"accepted-{mode}", "a") as log:  # tests wait for a client on it
            log.write("1\n")
        if mode == "garbage":
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
            conn.close()
        elif mode == "close":
            conn.close()
        elif mode == "silent":
            threading.Thread(target=_hold, args=(conn, folder), daemon=True).start()
        else:
            server = _TakeAll(folder) if mode == "mute" else _DenyAll()
            threading.Thread(target=_ssh, args=(conn, key, server), daemon=True).start()


def _hold(conn: socket.socket, folder: Path) -> None:
    """Say nothing until the client gives up (EOF) or 120 s passed; log how long that was."""
    started = time.monotonic()
    conn.settimeout(120)
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    finally:
        conn.close()
        with open(folder / "held-silent", "a") as log:
            log.write(f"{time.monotonic() - started:.2f}\n")


def _ssh(conn: socket.socket, key: paramiko.PKey, server: paramiko.ServerInterface) -> None:
    transport = paramiko.Transport(conn)
    transport.add_server_key(key)
    try:
        transport.start_server(server=server)
        held = []  # ``mute``: logged in, commands taken (their channels kept open), no answer
        while transport.is_active():
            held.append(transport.accept(1))
    except Exception:  # the client gave up: nothing to do
        pass
    finally:
        transport.close()


def main() -> None:
    folder = Path(sys.argv[1])
    key = paramiko.Ed25519Key.from_private_key_file(str(folder / "host_key"))
    ports = {}
    for mode in ("garbage", "silent", "close", "ssh", "mute"):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        ports[mode] = sock.getsockname()[1]
        threading.Thread(target=_serve, args=(sock, mode, key, folder), daemon=True).start()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    ports["closed"] = free.getsockname()[1]
    free.close()
    print(json.dumps(ports), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
