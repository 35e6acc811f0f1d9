"""Snapshot documents: parsing the host state, storage on the controller, diff."""

from __future__ import annotations

import base64
import json

import pytest

from gpuhost.errors import ConfigError, ParseError
from gpuhost.probe.script import APT_HOLDS_CODE, UNAME_CODE
from gpuhost.upgrade.host_state import (
    MARK,
    file_bytes,
    file_category,
    parse_host_state,
    state_command,
)
from gpuhost.upgrade.snapshot import (
    SnapshotStore,
    build_snapshot,
    diff,
    format_diff,
    load_snapshot,
    profile_from_files,
    validate_document,
)
from tests.schema_check import assert_valid

PIN_OLD = "Package: nvidia-smi libnvidia-ml1\nPin: version 535.261.03-1\nPin-Priority: 1001\n"
PIN_NEW = (
    "Package: nvidia-smi libnvidia-ml1\nPin: version 535.309.01-0+deb12u1\nPin-Priority: 1001\n"
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def host_output(version="535.261.03-1", pin=PIN_OLD, profile="debian12-nonfree-535", held=True):
    lines = [
        f"{MARK} packages",
        f"nvidia-smi\t{version}\tamd64\t{'hi' if held else 'ii'} ",
        f"libnvidia-ml1\t{version}\tamd64\tii ",
        "nvidia-persistenced\t535.171.04-1~deb12u1\tamd64\tii ",
        "curl\t7.88.1-10+deb12u14\tamd64\tii ",
        "linux-image-6.1.0-56-amd64\t6.1.140-1\tamd64\tii ",
        "nvidia-old\t1.0\tamd64\trc ",
        f"{MARK} holds",
        *(["libnvidia-ml1", "nvidia-smi"] if held else []),
        f"{MARK} uname",
        "6.1.0-56-amd64",
        f"{MARK} cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda1 nvidia-drm.modeset=1",
        f"{MARK} smi",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure"
        " that the latest NVIDIA driver is installed and running.",
        f"{MARK} smi_rc",
        "9",
        f"{MARK} file 644 /etc/apt/preferences.d/gpuhost-nvidia",
        _b64(pin),
        f"{MARK} file 644 /etc/gpuhost/profile",
        _b64(f"{profile}\n"),
        f"{MARK} file 600 /etc/modprobe.d/odd name.conf",
        _b64("options nvidia NVreg_PreserveVideoMemoryAllocations=1\n"),
        f"{MARK} file 644 /etc/cdi/nvidia.bin",
        base64.b64encode(b"\xff\xfe\x00binary").decode(),
        f"{MARK} end",
    ]
    return "\n".join(lines) + "\n"


def test_state_command_is_one_shell_line_forcing_english():
    cmd = state_command()
    assert cmd.startswith("export LC_ALL=C")
    assert "nvidia-smi -q -x" in cmd and APT_HOLDS_CODE in cmd and UNAME_CODE in cmd
    assert "/etc/apt/preferences.d/*" in cmd


def test_parse_host_state_keeps_coupled_packages_holds_and_files():
    state = parse_host_state(host_output())
    assert set(state.packages) == {"nvidia-smi", "libnvidia-ml1", "nvidia-persistenced"}
    assert state.packages["nvidia-smi"]["version"] == "535.261.03-1"
    assert "linux-image-6.1.0-56-amd64" in state.kernel_packages
    assert state.holds == ["libnvidia-ml1", "nvidia-smi"]
    assert state.kernel_release == "6.1.0-56-amd64"
    assert "nvidia-drm.modeset=1" in state.cmdline
    assert state.smi_rc == 9
    pin = state.files["/etc/apt/preferences.d/gpuhost-nvidia"]
    assert pin["category"] == "apt_preferences" and pin["content"] == PIN_OLD
    assert state.files["/etc/modprobe.d/odd name.conf"]["mode"] == "600"
    binary = state.files["/etc/cdi/nvidia.bin"]
    assert "content" not in binary and file_bytes(binary) == b"\xff\xfe\x00binary"


@pytest.mark.parametrize(
    "text", ["", "garbage\n", f"{MARK} packages\nnvidia-smi\t1\tamd64\tii\n"], ids=str
)
def test_incomplete_output_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_host_state(text)


def test_file_categories():
    assert file_category("/etc/apt/sources.list.d/debian.sources") == "apt_sources"
    assert file_category("/etc/systemd/system/nvidia-persistenced.service.d/x.conf") == "units"
    assert file_category("/usr/share/nvidia/nvswitch/fabricmanager.cfg") == "fabric_manager"
    assert file_category("/etc/containerd/config.toml") == "container_runtime"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("debian12-nonfree-535\n", "debian12-nonfree-535"),
        ("# written by gpuhost\nprofile=debian12-nonfree-535\n", "debian12-nonfree-535"),
        ("profile: p2\n", "p2"),
        ('{"schema": 1, "profile": "debian12-nonfree-535", "driver": {}}', "debian12-nonfree-535"),
        ("", None),
    ],
)
def test_profile_from_files(content, expected):
    assert profile_from_files({"/etc/gpuhost/profile": {"content": content}}) == expected


def test_build_snapshot_document():
    doc = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    assert_valid(doc, "snapshot")
    assert doc["schema"] == 1 and doc["kind"] == "gpuhost.snapshot"
    assert doc["profile"] == "debian12-nonfree-535"
    assert doc["gpu"]["rc"] == 9
    assert doc["gpu"]["state"] not in (None, "ok")  # the "no driver" state, not a fake pass
    json.dumps(doc)  # JSON-ready


def test_store_save_list_latest_resolve(tmp_path):
    store = SnapshotStore(tmp_path / "snapshots")
    a = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    b = build_snapshot("h1", parse_host_state(host_output()), "20250102T000000Z")
    for doc in (a, b):
        store.save(doc)
    assert [r.id for r in store.list("h1")] == ["20250101T000000Z", "20250102T000000Z"]
    assert store.latest("h1").id == "20250102T000000Z"
    assert store.resolve("h1") == store.resolve("h1/20250102T000000Z")
    assert load_snapshot(store.resolve("h1/20250101T000000Z"))["id"] == "20250101T000000Z"
    assert store.unique_id("h1", "20250101T000000Z") == "20250101T000000Z-2"
    with pytest.raises(ConfigError, match="no snapshot 'nope'"):
        store.find("h1", "nope")
    with pytest.raises(ConfigError, match="host/id"):
        store.resolve("h9")


def test_load_rejects_foreign_documents(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"kind": "other"}')
    with pytest.raises(ConfigError, match="expected 'gpuhost.snapshot'"):
        load_snapshot(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        load_snapshot(path)


def test_diff_shows_versions_holds_profile_and_file_content():
    old = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    new = build_snapshot(
        "h1",
        parse_host_state(
            host_output(
                version="535.309.01-0+deb12u1",
                pin=PIN_NEW,
                profile="debian12-nonfree-535-security",
                held=False,
            )
        ),
        "20250102T000000Z",
    )
    changes = diff(old, new)
    lines = [c.line() for c in changes]
    assert "packages: nvidia-smi: 535.261.03-1 -> 535.309.01-0+deb12u1" in lines
    assert "holds: - nvidia-smi held" in lines
    assert "profile: name: debian12-nonfree-535 -> debian12-nonfree-535-security" in lines
    pin = next(c for c in changes if c.key.startswith("/etc/apt/preferences.d/gpuhost-nvidia"))
    assert "-Pin: version 535.261.03-1" in pin.detail
    assert "+Pin: version 535.309.01-0+deb12u1" in pin.detail
    text = format_diff(old, new, changes)
    assert text.startswith("--- h1 20250101T000000Z\n+++ h1 20250102T000000Z")
    assert diff(old, old) == []
    assert format_diff(old, old, []).endswith("no changes")


def test_prune_plan_keeps_the_newest_the_ones_in_use_and_unknown_ones() -> None:
    from gpuhost.upgrade.package_cache import prune_plan

    on_host = [
        "20250101T000000Z",
        "20250102T000000Z",
        "20250102T000000Z-2",
        "20250103T000000Z",
        "20240101T000000Z",
    ]
    known = ["20250101T000000Z", "20250102T000000Z", "20250102T000000Z-2", "20250103T000000Z"]
    plan = prune_plan(on_host, known, keep=2, in_use={"20250101T000000Z"})
    assert plan.remove == ["20250102T000000Z"]
    assert plan.keep == ["20250101T000000Z", "20250102T000000Z-2", "20250103T000000Z"]
    assert plan.unknown == ["20240101T000000Z"]  # another state dir's snapshot: never removed
    assert plan.freed({"20250102T000000Z": 5, "20250103T000000Z": 7}) == 5


def test_cache_listing_and_removal_commands() -> None:
    import pytest

    from gpuhost.upgrade.package_cache import parse_cache_dirs, remove_command

    listing = "DIR 20250101T000000Z 1024\nDIR lost+found 10\nDIR 20250102T000000Z-2 2048\n"
    assert parse_cache_dirs(listing) == {"20250101T000000Z": 1024, "20250102T000000Z-2": 2048}
    assert remove_command(["20250101T000000Z"]) == (
        "rm -rf -- /var/cache/gpuhost/packages/20250101T000000Z"
    )
    with pytest.raises(ValueError, match="not a snapshot id"):
        remove_command(["../../etc"])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"holds": [["x"]]}, "holds: found ['x'], expected package names"),
        ({"holds": [1, "a"]}, "holds: found 1"),
        ({"kernel": "6.1"}, "kernel: found '6.1', expected an object"),
        ({"kernel": {"packages": [1]}}, "kernel.packages: expected an object"),
        ({"kernel": {"packages": {"linux": "6.1"}}}, "kernel.packages: expected an object"),
        ({"kernel": {"release": 6}}, "kernel.release: found 6, expected text"),
    ],
)
def test_snapshot_shapes_that_diff_and_rollback_cannot_use_are_refused(change, said):
    """These passed the shape check and made 'snapshot diff' raise TypeError/AttributeError
    (found by a bad-input probe); rollback accepted them."""
    doc = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    doc = json.loads(json.dumps(doc)) | change
    with pytest.raises(ConfigError) as err:
        validate_document(doc, "snap.json")
    assert str(err.value) == f"snap.json: {said}" or str(err.value).startswith(f"snap.json: {said}")


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ({"category": "gpuhost", "sha256": 5}, ".sha256: found 5, expected text"),
        ({"category": "gpuhost", "content": "\udcff"}, ": content not readable"),
        ({"category": "gpuhost", "content_b64": "abc"}, ": content not readable"),  # bad padding
        ({"category": "gpuhost", "content": None}, ".content: found None, expected text"),
    ],
)
def test_file_records_must_give_back_their_bytes(record, said):
    doc = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    doc = json.loads(json.dumps(doc))
    doc["files"] = {"/etc/gpuhost/x": record}
    with pytest.raises(ConfigError, match="^snap.json: files./etc/gpuhost/x") as err:
        validate_document(doc, "snap.json")
    assert said in str(err.value)
