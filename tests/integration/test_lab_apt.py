"""apt inside lab hosts survives a cut-off download and many hosts updating at once.

Debian 12's apt (2.6.x) never retries an index whose download failed transiently when other
indexes of the same server were queued meanwhile: it waits forever (apt bug LP: #2003851, fixed
only in apt 3.0.3/3.1.3).  apt-cacher-ng produces exactly such failures when several hosts make it
refresh the same index.  The lab's apt configuration retries at once, which avoids that state; see
docs/testing.md ("apt in lab hosts").
"""

from __future__ import annotations

import http.server
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab


def _cutting_server(repo_dir: Path, bind: str) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    """Serve the stand-in repository as two flat repositories, /a/ and /b/, over HTTP/1.1.

    The first answer for /b/InRelease is cut off after its headers and half its body, and the
    connection is closed: the "Remote end closed connection" failure apt saw from the proxy.
    """
    cuts: list[str] = []
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = self.path.split("?")[0].split("/", 2)  # "", "a" or "b", file name
            flavour, rest = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
            target = repo_dir / rest
            if flavour not in ("a", "b") or "/" in rest or not target.is_file():
                self.send_error(404)
                return
            body = target.read_bytes()
            with lock:
                cut = flavour == "b" and rest == "InRelease" and not cuts
                if cut:
                    cuts.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if cut:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((bind, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, cuts


def test_cut_off_index_is_retried_and_update_completes(lab, fresh_host) -> None:
    view = lab(max(1, lab.count))
    repo_dir = view.repo_key_path.parent / view.repo_url.split("/", 3)[3].rstrip("/")
    assert (repo_dir / "InRelease").is_file(), repo_dir
    server, cuts = _cutting_server(repo_dir, view.gateway)
    try:
        base = f"http://{view.gateway}:{server.server_address[1]}"
        key = view.repo_key_path_on_host
        sources = "/etc/apt/sources.list.d/cut.list"
        setup = fresh_host.run(
            f"printf 'deb [signed-by={key}] {base}/a/ /\\ndeb [signed-by={key}] {base}/b/ /\\n'"
            f" > {sources}")
        assert setup.returncode == 0, setup.stderr
        # only these two sources; the timeout turns apt's endless wait into a failure here
        proc = fresh_host.run(
            f"timeout 120 apt-get update -o Dir::Etc::sourcelist={sources} "
            "-o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 2>&1", timeout=180)
    finally:
        server.shutdown()
        server.server_close()
    out = proc.stdout + proc.stderr
    assert cuts == ["/b/InRelease"], "the server never cut a download off"
    assert proc.returncode == 0, f"apt-get update exited {proc.returncode}:\n{out[-3000:]}"
    # apt reported the cut download as ignored for now, then fetched it on its retry
    ign = re.search(rf"^Ign:\d+ {re.escape(base)}/b\s+InRelease", out, re.M)
    assert ign, out[-3000:]
    again = re.compile(rf"^Get:\d+ {re.escape(base)}/b\s+InRelease", re.M).search(out, ign.end())
    assert again, out[-3000:]
    lists = fresh_host.run("ls /var/lib/apt/lists/").stdout
    assert "_a_Packages" in lists and "_b_Packages" in lists, lists


def test_hosts_updating_at_once_all_complete(lab) -> None:
    view = lab(4)
    cmd = "rm -rf /var/lib/apt/lists/* && timeout 600 apt-get update 2>&1; echo exit=$?"
    try:
        for round_ in range(2):
            # every round from empty lists: each host fetches every Debian index through the proxy
            with ThreadPoolExecutor(len(view.hosts)) as pool:
                results = list(pool.map(lambda h: (h, h.run(cmd, timeout=660)), view.hosts))
            for host, proc in results:
                out = proc.stdout + proc.stderr
                assert "exit=0" in out, f"round {round_}, {host.name}:\n{out[-3000:]}"
                assert "Err:" not in out and "W: " not in out, f"{host.name}:\n{out[-3000:]}"
    finally:
        view.reset()
