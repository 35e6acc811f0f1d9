"""Provider snapshots: an image or volume snapshot taken outside the host before any change.

A provider gets the host name, the host's inventory data and a label, and returns a record that
goes into the snapshot document. Any failure raises ``HostError``; the orchestrator then stops
that host's upgrade before anything was changed on it.

- ``command``: runs a configured command on the controller (an LVM/ZFS snapshot over SSH, a
  cloud CLI, ...) with ``{host}``, ``{label}`` and ``{snapshot_id}`` filled in (shell-quoted),
  and records its output.
- ``openstack``: Keystone v3 password token, Nova ``createImage`` of the host's server, then
  polls Glance until the image is ``active`` (timeouts, retries on connection errors and 5xx/429,
  one re-authentication on 401).

Configuration is a YAML/JSON mapping (``--provider-config FILE``)::

    type: openstack
    auth_url: https://keystone.example:5000/v3
    username: gpuhost            # or env OS_USERNAME;  password: env OS_PASSWORD (never in files)
    project_name: gpu            # or env OS_PROJECT_NAME
    user_domain_name: Default    # project_domain_name: Default
    region: RegionOne            # optional; interface: public
    image_timeout_s: 1800        # poll_interval_s: 10, request_timeout_s: 30, retries: 3

    type: command
    command: "ssh {host} lvcreate -s -n gpuhost-{snapshot_id} -L 5G vg0/root"
    timeout_s: 600
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import requests

from gpuhost import toolrun
from gpuhost.errors import ConfigError, HostError
from gpuhost.redaction import remember_secrets


class SnapshotProvider(Protocol):
    name: str

    def snapshot(
        self, host: str, host_data: Mapping[str, Any], label: str, snapshot_id: str
    ) -> dict[str, Any]:
        """Take the snapshot; return what to record; raise HostError on any failure."""


class NoProvider:
    name = "none"

    def snapshot(
        self, host: str, host_data: Mapping[str, Any], label: str, snapshot_id: str
    ) -> dict[str, Any]:
        return {"provider": "none"}


class CommandProvider:
    name = "command"

    def __init__(self, command: str, timeout_s: float = 600) -> None:
        if not command.strip():
            raise ConfigError("provider config: 'command' is empty (expected a command line)")
        self.command = command
        self.timeout_s = timeout_s
        self.argv("host", "label", "id")  # a bad template is refused now, not at the snapshot

    def argv(self, host: str, label: str, snapshot_id: str) -> list[str]:
        try:
            line = self.command.format(
                host=shlex.quote(host),
                label=shlex.quote(label),
                snapshot_id=shlex.quote(snapshot_id),
            )
        except (KeyError, IndexError, AttributeError, ValueError) as exc:
            raise ConfigError(
                f"provider config: command {self.command!r} is not a valid template ({exc}); "
                "expected placeholders {host}, {label}, {snapshot_id} and {{ }} for a brace"
            ) from None
        return ["/bin/sh", "-c", line]

    def snapshot(
        self, host: str, host_data: Mapping[str, Any], label: str, snapshot_id: str
    ) -> dict[str, Any]:
        argv = self.argv(host, label, snapshot_id)
        try:
            proc = toolrun.run(argv, self.timeout_s)
        except OSError as exc:
            raise HostError(host, f"provider command cannot start: {exc.strerror or exc}") from None
        if proc.timed_out:
            raise HostError(
                host, f"provider command timed out after {self.timeout_s:g}s: {argv[2]}"
            )
        stdout, stderr = proc.text(), proc.text(proc.stderr)
        record = {
            "provider": "command",
            "command": argv[2],
            "rc": proc.returncode,
            "stdout": stdout[-4000:],
            "stderr": stderr[-4000:],
        }
        if proc.returncode != 0:
            last = (stderr.strip() or stdout.strip()).splitlines()[-1:] or [""]
            raise HostError(
                host, f"provider command exited {proc.returncode}: {argv[2]}: {last[0][:200]}"
            )
        return record


class OpenStackProvider:
    """Nova server image through the OpenStack APIs, with ``requests``."""

    name = "openstack"

    def __init__(
        self,
        auth_url: str,
        username: str,
        password: str,
        project_name: str,
        user_domain_name: str = "Default",
        project_domain_name: str = "Default",
        region: str | None = None,
        interface: str = "public",
        image_timeout_s: float = 1800,
        poll_interval_s: float = 10,
        request_timeout_s: float = 30,
        retries: int = 3,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.auth_url = auth_url.rstrip("/")
        self.username = username
        self.password = password
        self.project_name = project_name
        self.user_domain_name = user_domain_name
        self.project_domain_name = project_domain_name
        self.region = region
        self.interface = interface
        self.image_timeout_s = image_timeout_s
        self.poll_interval_s = poll_interval_s
        self.request_timeout_s = request_timeout_s
        self.retries = retries
        self.session = session or requests.Session()
        self.sleep = sleep
        self.clock = clock
        self._token: str | None = None
        self._catalog: list[dict[str, Any]] = []

    # -- public ------------------------------------------------------------------------------

    def snapshot(
        self, host: str, host_data: Mapping[str, Any], label: str, snapshot_id: str
    ) -> dict[str, Any]:
        server_ref = str(host_data.get("openstack_server") or host)
        compute = self._endpoint(host, "compute")
        server_id = self._server_id(host, compute, server_ref)
        image_id = self._create_image(host, compute, server_id, label, snapshot_id)
        image = self._wait_active(host, image_id)
        return {
            "provider": "openstack",
            "server_id": server_id,
            "image_id": image_id,
            "image_name": label,
            "status": image.get("status"),
            "size": image.get("size"),
        }

    # -- keystone ----------------------------------------------------------------------------

    def authenticate(self, host: str) -> None:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": self.username,
                            "domain": {"name": self.user_domain_name},
                            "password": self.password,
                        }
                    },
                },
                "scope": {
                    "project": {
                        "name": self.project_name,
                        "domain": {"name": self.project_domain_name},
                    }
                },
            }
        }
        response = self._send(host, "POST", f"{self.auth_url}/auth/tokens", json=body, auth=False)
        if response.status_code != 201:
            raise HostError(
                host,
                f"openstack: authentication at {self.auth_url} failed "
                f"(HTTP {response.status_code}: {_error_text(response)})",
            )
        token = response.headers.get("X-Subject-Token")
        if not token:
            raise HostError(host, "openstack: keystone answered 201 without X-Subject-Token")
        self._token = token
        self._catalog = _json(host, response).get("token", {}).get("catalog", [])

    def _endpoint(self, host: str, service_type: str) -> str:
        if self._token is None:
            self.authenticate(host)
        for service in self._catalog:
            if service.get("type") != service_type:
                continue
            for endpoint in service.get("endpoints", []):
                if endpoint.get("interface") != self.interface:
                    continue
                if self.region and endpoint.get("region_id", endpoint.get("region")) not in (
                    self.region,
                ):
                    continue
                return str(endpoint["url"]).rstrip("/")
        raise HostError(
            host,
            f"openstack: no {self.interface} {service_type} endpoint"
            + (f" in region {self.region}" if self.region else "")
            + " in the service catalog",
        )

    # -- nova / glance -----------------------------------------------------------------------

    def _server_id(self, host: str, compute: str, ref: str) -> str:
        response = self._request(host, "GET", f"{compute}/servers/{ref}")
        if response.status_code == 200:
            return str(_json(host, response)["server"]["id"])
        if response.status_code != 404:
            raise _http_error(host, "looking up server", ref, response)
        response = self._request(
            host, "GET", f"{compute}/servers", params={"name": f"^{_regex_escape(ref)}$"}
        )
        if response.status_code != 200:
            raise _http_error(host, "listing servers named", ref, response)
        servers = _json(host, response).get("servers", [])
        if len(servers) != 1:
            raise HostError(
                host,
                f"openstack: expected exactly one server named {ref!r}, found {len(servers)} "
                "(set host data openstack_server to the server id)",
            )
        return str(servers[0]["id"])

    def _create_image(
        self, host: str, compute: str, server_id: str, label: str, snapshot_id: str
    ) -> str:
        body = {
            "createImage": {
                "name": label,
                "metadata": {"gpuhost_snapshot": snapshot_id, "gpuhost_host": host},
            }
        }
        response = self._request(
            host,
            "POST",
            f"{compute}/servers/{server_id}/action",
            json=body,
            retry_server_errors=False,  # a retried createImage could make two images
        )
        if response.status_code not in (200, 202):
            raise _http_error(host, "createImage for server", server_id, response)
        image_id = None
        if response.content:
            image_id = _json(host, response).get("image_id")
        if not image_id:
            location = response.headers.get("Location", "")
            image_id = location.rstrip("/").rsplit("/", 1)[-1] if location else None
        if not image_id:
            raise HostError(host, "openstack: createImage answered without an image id")
        return str(image_id)

    def _wait_active(self, host: str, image_id: str) -> dict[str, Any]:
        image_url = f"{self._endpoint(host, 'image')}/v2/images/{image_id}"
        deadline = self.clock() + self.image_timeout_s
        status = "unknown"
        while True:
            response = self._request(host, "GET", image_url)
            if response.status_code == 200:
                image = _json(host, response)
                status = str(image.get("status"))
                if status == "active":
                    return image
                if status in ("killed", "deleted", "pending_delete", "deactivated"):
                    raise HostError(host, f"openstack: image {image_id} ended in status {status}")
            elif response.status_code != 404:  # right after createImage glance may not know it
                raise _http_error(host, "reading image", image_id, response)
            if self.clock() >= deadline:
                raise HostError(
                    host,
                    f"openstack: image {image_id} not active after {self.image_timeout_s:g}s "
                    f"(last status {status})",
                )
            self.sleep(self.poll_interval_s)

    # -- HTTP with retries -------------------------------------------------------------------

    def _request(
        self, host: str, method: str, url: str, retry_server_errors: bool = True, **kwargs: Any
    ) -> requests.Response:
        response = self._send(host, method, url, retry_server_errors=retry_server_errors, **kwargs)
        if response.status_code == 401:  # token expired: authenticate once more
            self.authenticate(host)
            response = self._send(
                host, method, url, retry_server_errors=retry_server_errors, **kwargs
            )
        return response

    def _send(
        self,
        host: str,
        method: str,
        url: str,
        auth: bool = True,
        retry_server_errors: bool = True,
        **kwargs: Any,
    ) -> requests.Response:
        headers = {"Accept": "application/json"}
        if auth and self._token:
            headers["X-Auth-Token"] = self._token
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(min(2.0**attempt, 30.0))
            try:
                response = self.session.request(
                    method, url, headers=headers, timeout=self.request_timeout_s, **kwargs
                )
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if retry_server_errors and (response.status_code >= 500 or response.status_code == 429):
                last = f"HTTP {response.status_code}: {_error_text(response)}"
                continue
            return response
        raise HostError(
            host, f"openstack: {method} {url} failed after {self.retries + 1} attempt(s): {last}"
        )


def _json(host: str, response: requests.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        raise HostError(
            host, f"openstack: {response.url} answered non-JSON: {response.text[:120]!r}"
        ) from None
    if not isinstance(value, dict):
        raise HostError(host, f"openstack: {response.url} answered {type(value).__name__}")
    return value


def _error_text(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason or ""
    if isinstance(body, dict):
        for value in body.values():
            if isinstance(value, dict) and "message" in value:
                return str(value["message"])
        if "message" in body:
            return str(body["message"])
    return str(body)[:200]


def _http_error(host: str, what: str, ref: str, response: requests.Response) -> HostError:
    return HostError(
        host,
        f"openstack: {what} {ref} failed (HTTP {response.status_code}: {_error_text(response)})",
    )


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in text)


def _seconds(config: Mapping[str, Any], key: str, default: float, source: str) -> float:
    """A positive, finite number of seconds from ``config[key]`` (``default`` when absent)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
        raise ConfigError(
            f"{source}: {key} is {value!r}, expected a number of seconds above 0 (e.g. {default})"
        )
    return float(value)


def _count(config: Mapping[str, Any], key: str, default: int, source: str) -> int:
    """A non-negative whole number setting (``retries: .inf`` or ``true`` is refused)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{source}: {key}: found {value!r:.40}, expected a whole number >= 0")
    return value


_KEYS = {
    "command": {"type", "command", "timeout_s"},
    "openstack": {
        "type", "auth_url", "username", "project_name", "user_domain_name",
        "project_domain_name", "region", "interface", "image_timeout_s", "poll_interval_s",
        "request_timeout_s", "retries", "password",
    },
}  # fmt: skip


def _text(config: Mapping[str, Any], key: str, env: str | None, source: str) -> str | None:
    """``config[key]`` when given: a non-empty string, else one ConfigError line (a list, a
    number or null where a string belongs was turned into its text: "['a']", "None"); when
    absent, the environment variable ``env``'s value (None if unset)."""
    if key not in config:
        return os.environ.get(env) or None if env else None
    value = config[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{source}: {key}: found {value!r:.60}, expected a non-empty string")
    return value


def _known_keys(config: Mapping[str, Any], kind: str, source: str) -> None:
    unknown = sorted(str(k) for k in config if k not in _KEYS[kind])
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) for a {kind} provider: {', '.join(unknown)}; expected "
            f"{', '.join(sorted(_KEYS[kind] - {'password'}))}"
        )


def plain_http_warning(config: Mapping[str, Any] | None, source: str) -> str | None:
    """A warning when an openstack provider would send its password over plain ``http://``
    (anyone on the path reads it), else None."""
    if not config or config.get("type") != "openstack":
        return None
    url = str(config.get("auth_url") or os.environ.get("OS_AUTH_URL") or "")
    if url.lower().startswith("http://"):
        return (
            f"{source}: auth_url {url} is plain http://: the OpenStack password (OS_PASSWORD) "
            "is sent unencrypted; use https://"
        )
    return None


def make_provider(config: Mapping[str, Any] | None, source: str = "provider config") -> Any:
    """Build a provider from its configuration mapping (None = no provider snapshot)."""
    if not config:
        return NoProvider()
    kind = config.get("type")
    if isinstance(kind, str) and kind in _KEYS:
        _known_keys(config, kind, source)
    if kind == "command":
        command = config.get("command")
        if not isinstance(command, str):
            raise ConfigError(f"{source}: 'command' must be a string (the command line to run)")
        timeout_s = _seconds(config, "timeout_s", 600, source)
        try:
            return CommandProvider(command, timeout_s)
        except ConfigError as exc:  # name the file the command came from
            raise ConfigError(str(exc).replace("provider config", source, 1)) from None
    if kind == "openstack":
        if "password" in config:
            raise ConfigError(f"{source}: do not put 'password' in a file; set OS_PASSWORD")
        values = {
            "auth_url": _text(config, "auth_url", "OS_AUTH_URL", source),
            "username": _text(config, "username", "OS_USERNAME", source),
            "password": os.environ.get("OS_PASSWORD"),
            "project_name": _text(config, "project_name", "OS_PROJECT_NAME", source),
        }
        missing = [k for k, v in values.items() if not v]
        if missing:
            raise ConfigError(
                f"{source}: openstack provider needs {', '.join(missing)} "
                "(in the file, or OS_AUTH_URL / OS_USERNAME / OS_PASSWORD / OS_PROJECT_NAME)"
            )
        remember_secrets([values["password"]])
        try:
            return OpenStackProvider(
                auth_url=str(values["auth_url"]),
                username=str(values["username"]),
                password=str(values["password"]),
                project_name=str(values["project_name"]),
                user_domain_name=_text(
                    config, "user_domain_name", "OS_USER_DOMAIN_NAME", source
                )
                or "Default",
                project_domain_name=_text(
                    config, "project_domain_name", "OS_PROJECT_DOMAIN_NAME", source
                )
                or "Default",
                region=_text(config, "region", "OS_REGION_NAME", source),
                interface=_text(config, "interface", None, source) or "public",
                image_timeout_s=_seconds(config, "image_timeout_s", 1800, source),
                poll_interval_s=_seconds(config, "poll_interval_s", 10, source),
                request_timeout_s=_seconds(config, "request_timeout_s", 30, source),
                retries=_count(config, "retries", 3, source),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: bad number in openstack settings: {exc}") from None
    raise ConfigError(f"{source}: type is {kind!r}, expected 'command' or 'openstack'")
