"""Snapshot providers: the command provider, and the OpenStack provider against a local HTTP
server that implements the Keystone, Nova and Glance calls it makes (errors, slow builds)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuhost.errors import ConfigError, HostError
from gpuhost.upgrade.providers import (
    CommandProvider,
    NoProvider,
    OpenStackProvider,
    make_provider,
)

SERVER_ID = "7d1c2f0e-0000-4000-8000-000000000001"


class Cloud:
    """State of the fake cloud, shared with the request handler."""

    def __init__(self):
        self.base = ""
        self.tokens_issued = 0
        self.valid_tokens: set[str] = set()
        self.polls_until_active = 2
        self.image_final = "active"
        self.fail_next: dict[str, list[int]] = {}  # path prefix -> status codes to answer first
        self.create_status = 202
        self.new_microversion = True
        self.servers = {SERVER_ID: "gpu-node-1"}
        self.images: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.password = "s3cret"


def make_handler(cloud: Cloud):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, body=None, headers=None):
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _injected(self):
            for prefix, codes in cloud.fail_next.items():
                if self.path.startswith(prefix) and codes:
                    code = codes.pop(0)
                    self._send(code, {"error": {"message": f"injected {code}"}})
                    return True
            return False

        def _authorized(self):
            if self.headers.get("X-Auth-Token") in cloud.valid_tokens:
                return True
            self._send(401, {"error": {"message": "The request you have made requires auth"}})
            return False

        def do_POST(self):
            cloud.requests.append(("POST", self.path))
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self._injected():
                return
            if self.path == "/identity/v3/auth/tokens":
                user = body["auth"]["identity"]["password"]["user"]
                if user["password"] != cloud.password:
                    return self._send(401, {"error": {"message": "Invalid credentials"}})
                assert body["auth"]["scope"]["project"]["name"] == "gpu"
                cloud.tokens_issued += 1
                token = f"tok-{cloud.tokens_issued}"
                cloud.valid_tokens.add(token)
                catalog = [
                    {
                        "type": "compute",
                        "endpoints": [
                            {
                                "interface": "public",
                                "region_id": "R1",
                                "url": cloud.base + "/compute/v2.1",
                            },
                            {
                                "interface": "internal",
                                "region_id": "R1",
                                "url": "http://10.0.0.1/x",
                            },
                        ],
                    },
                    {
                        "type": "image",
                        "endpoints": [
                            {"interface": "public", "region_id": "R1", "url": cloud.base + "/image"}
                        ],
                    },
                ]
                return self._send(201, {"token": {"catalog": catalog}}, {"X-Subject-Token": token})
            if not self._authorized():
                return None
            prefix = "/compute/v2.1/servers/"
            if self.path.startswith(prefix) and self.path.endswith("/action"):
                server = self.path[len(prefix) : -len("/action")]
                if server not in cloud.servers:
                    return self._send(404, {"itemNotFound": {"message": "no server"}})
                if cloud.create_status != 202:
                    return self._send(
                        cloud.create_status, {"conflictingRequest": {"message": "task_state"}}
                    )
                image_id = f"img-{len(cloud.images) + 1}"
                meta = body["createImage"]["metadata"]
                cloud.images[image_id] = {
                    "polls": 0,
                    "name": body["createImage"]["name"],
                    "meta": meta,
                }
                location = {"Location": f"{cloud.base}/image/v2/images/{image_id}"}
                if cloud.new_microversion:
                    return self._send(202, {"image_id": image_id}, location)
                return self._send(202, None, location)
            return self._send(404, {"error": {"message": "unknown"}})

        def do_GET(self):
            cloud.requests.append(("GET", self.path))
            if self._injected() or not self._authorized():
                return None
            if self.path.startswith("/compute/v2.1/servers?"):
                wanted = self.path.split("name=", 1)[1]
                import urllib.parse

                pattern = urllib.parse.unquote(wanted).strip("^$").replace("\\", "")
                found = [{"id": i, "name": n} for i, n in cloud.servers.items() if n == pattern]
                return self._send(200, {"servers": found})
            if self.path.startswith("/compute/v2.1/servers/"):
                ref = self.path.rsplit("/", 1)[1]
                if ref in cloud.servers:
                    return self._send(200, {"server": {"id": ref, "name": cloud.servers[ref]}})
                return self._send(404, {"itemNotFound": {"message": f"server {ref} not found"}})
            if self.path.startswith("/image/v2/images/"):
                image_id = self.path.rsplit("/", 1)[1]
                image = cloud.images.get(image_id)
                if image is None:
                    return self._send(404, {"message": "no image"})
                image["polls"] += 1
                if image["polls"] > cloud.polls_until_active:
                    status = cloud.image_final
                else:
                    status = "queued" if image["polls"] == 1 else "saving"
                return self._send(200, {"id": image_id, "status": status, "size": 1234})
            return self._send(404, {"error": {"message": "unknown"}})

    return Handler


@pytest.fixture
def cloud():
    state = Cloud()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def provider(cloud, **kw):
    settings = dict(
        auth_url=cloud.base + "/identity/v3",
        username="gpuhost",
        password="s3cret",
        project_name="gpu",
        region="R1",
        image_timeout_s=5,
        poll_interval_s=0.01,
        request_timeout_s=5,
        retries=2,
        sleep=lambda s: None,
    )
    settings.update(kw)
    return OpenStackProvider(**settings)


def test_snapshot_by_server_id_waits_until_active(cloud):
    cloud.polls_until_active = 3
    record = provider(cloud).snapshot("h1", {"openstack_server": SERVER_ID}, "gpuhost-h1-S1", "S1")
    assert record["provider"] == "openstack"
    assert record["server_id"] == SERVER_ID and record["status"] == "active"
    assert cloud.images[record["image_id"]]["polls"] == 4
    assert cloud.images[record["image_id"]]["meta"] == {
        "gpuhost_snapshot": "S1",
        "gpuhost_host": "h1",
    }


def test_server_found_by_name_and_old_microversion_location_header(cloud):
    cloud.new_microversion = False
    record = provider(cloud).snapshot("gpu-node-1", {}, "label", "S1")
    assert record["server_id"] == SERVER_ID
    assert record["image_id"] in cloud.images


def test_server_errors_are_retried(cloud):
    cloud.fail_next = {"/identity": [503], "/compute/v2.1/servers/": [500, 502]}
    record = provider(cloud).snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")
    assert record["status"] == "active"


def test_persistent_server_errors_give_up_with_a_clear_message(cloud):
    cloud.fail_next = {"/compute/v2.1/servers/": [500, 500, 500, 500]}
    with pytest.raises(
        HostError, match=r"h1: openstack: GET .* failed after 3 attempt\(s\): HTTP 500"
    ):
        provider(cloud).snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")


def test_expired_token_is_renewed_once(cloud):
    p = provider(cloud)
    p.authenticate("h1")
    cloud.valid_tokens.clear()  # the token expired server-side
    record = p.snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")
    assert record["status"] == "active"
    assert cloud.tokens_issued == 2


def test_wrong_password(cloud):
    with pytest.raises(
        HostError, match="authentication .* failed \\(HTTP 401: Invalid credentials"
    ):
        provider(cloud, password="nope").snapshot("h1", {}, "l", "S1")


def test_slow_image_build_times_out(cloud):
    cloud.polls_until_active = 10**6
    clock = iter(range(0, 10**6, 1))
    p = provider(cloud, image_timeout_s=5, clock=lambda: float(next(clock)))
    with pytest.raises(HostError, match=r"not active after 5s \(last status saving\)"):
        p.snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")


def test_slow_image_build_in_real_time(cloud):
    cloud.polls_until_active = 5
    p = provider(cloud, poll_interval_s=0.05, sleep=__import__("time").sleep)
    assert p.snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")["status"] == "active"


def test_image_that_dies_is_a_failure(cloud):
    cloud.image_final = "killed"
    with pytest.raises(HostError, match="ended in status killed"):
        provider(cloud).snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")


def test_create_image_conflict_is_not_retried(cloud):
    cloud.create_status = 409
    with pytest.raises(HostError, match=r"createImage for server .* failed \(HTTP 409: task_state"):
        provider(cloud).snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")
    assert sum(1 for m, p in cloud.requests if p.endswith("/action")) == 1


def test_unknown_server(cloud):
    with pytest.raises(HostError, match="exactly one server named 'ghost', found 0"):
        provider(cloud).snapshot("ghost", {}, "l", "S1")


def test_no_endpoint_in_region(cloud):
    with pytest.raises(HostError, match="no public compute endpoint in region R9"):
        provider(cloud, region="R9").snapshot("h1", {"openstack_server": SERVER_ID}, "l", "S1")


def test_unreachable_keystone():
    p = OpenStackProvider(
        "http://127.0.0.1:9/v3",
        "u",
        "p",
        "gpu",
        retries=1,
        request_timeout_s=1,
        sleep=lambda s: None,
    )
    with pytest.raises(HostError, match="failed after 2 attempt\\(s\\): ConnectionError"):
        p.snapshot("h1", {}, "l", "S1")


def test_command_provider_records_output_and_fails_loudly(tmp_path):
    out = tmp_path / "made"
    ok = CommandProvider(f"echo snap {{host}} {{snapshot_id}} > {out}; echo done")
    record = ok.snapshot("h1; rm -rf /", {}, "label", "S1")
    assert record["rc"] == 0 and record["stdout"] == "done\n"
    assert out.read_text() == "snap h1; rm -rf / S1\n"  # placeholders are shell-quoted
    bad = CommandProvider("echo 'lvcreate: volume group full' >&2; exit 5")
    with pytest.raises(HostError, match="exited 5: .*volume group full"):
        bad.snapshot("h1", {}, "l", "S1")
    slow = CommandProvider("sleep 5", timeout_s=0.2)
    with pytest.raises(HostError, match="timed out"):
        slow.snapshot("h1", {}, "l", "S1")
    with pytest.raises(ConfigError, match=r"not a valid template \('nope'\)"):
        CommandProvider("echo {nope}")  # refused when read, not when the snapshot runs


def test_make_provider(monkeypatch):
    assert isinstance(make_provider(None), NoProvider)
    assert isinstance(make_provider({"type": "command", "command": "true"}), CommandProvider)
    with pytest.raises(ConfigError, match="expected 'command' or 'openstack'"):
        make_provider({"type": "aws"})
    for key in ("OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError, match="needs auth_url, username, password, project_name"):
        make_provider({"type": "openstack"})
    with pytest.raises(ConfigError, match="OS_PASSWORD"):
        make_provider({"type": "openstack", "password": "x"})
    monkeypatch.setenv("OS_PASSWORD", "pw")
    built = make_provider(
        {"type": "openstack", "auth_url": "http://k/v3", "username": "u", "project_name": "p"}
    )
    assert isinstance(built, OpenStackProvider) and built.password == "pw"
