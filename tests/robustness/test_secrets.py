"""Secrets are never printed (issue 29): pyinfra's debug connect line under -v carried the
inventory's ssh_password; a provider password to a plain http:// URL went without a word; a bad
ssh_password value was echoed in the error."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from gpuhost.cli import main
from gpuhost.connection import RedactSecrets
from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import load_inventory
from gpuhost.redaction import redact_secrets, remember_secrets
from gpuhost.terminal import escaping_streams
from gpuhost.upgrade.settings import load_provider_config
from robustness.conftest import gpuhost

SECRET = "hunter2-Secret"


def _inventory(tmp_path, value) -> str:
    path = tmp_path / "inv.py"
    path.write_text(
        f"gpu = [('n1', {{'ssh_hostname': '127.0.0.1', 'ssh_port': 1, 'ssh_password': {value!r},"
        " 'gpuhost_harden': True})]\n"
    )
    return str(path)


@pytest.mark.parametrize("command", ["provision", "harden"])
def test_dry_verbose_runs_never_print_the_ssh_password(tmp_path, command):
    run = gpuhost(command, _inventory(tmp_path, SECRET), "--dry", "-v", "--connect-timeout", "2")
    assert "Connecting to" in run.err or "Connecting to" in run.out  # -v did show pyinfra's line
    assert SECRET not in run.out + run.err


def test_secret_pairs_are_hidden_in_log_lines():
    line = "Connecting to: h ({'port': 1, 'password': 'a\\'b', \"key_passphrase\": \"x y\"})"
    shown = redact_secrets(line + " token=abc123 api_secret: s3")
    assert "'password': '***'" in shown and '"key_passphrase": \'***\'' in shown
    assert "token='***'" in shown and "api_secret: '***'" in shown
    assert "a\\'b" not in shown and "abc123" not in shown and "s3" not in shown


# unusual: quotes, a backslash, a non-ASCII letter, a no-break space
UNUSUAL = "pa$$ w'o\"rd\\é\u00a0-Unusual"


@pytest.mark.parametrize("command", ["provision", "harden"])
def test_dry_verbose_runs_never_print_an_unusual_ssh_password(tmp_path, command):
    run = gpuhost(command, _inventory(tmp_path, UNUSUAL), "--dry", "-v", "--connect-timeout", "2")
    assert "Connecting to" in run.err or "Connecting to" in run.out
    for form in (UNUSUAL, repr(UNUSUAL)[1:-1], "Unusual"):
        assert form not in run.out + run.err


def test_a_secret_pair_logged_as_a_tuple_is_hidden():
    shown = redact_secrets("data: ('ssh_password', 'x') (\"api_token\", 'a b')")
    assert shown == "data: ('ssh_password', '***') (\"api_token\", '***')"
    assert redact_secrets("password, then the next step") == "password, then the next step"


def test_the_inventory_secret_values_are_hidden_wherever_they_appear(tmp_path, capsys):
    """Not only in key/value pairs: the value alone, quoted as Python or JSON, in a log record
    and on stderr (where error lines go)."""
    inv = tmp_path / "inv.py"
    inv.write_text(
        f"gpu = [('n1', {{'ssh_hostname': '127.0.0.1', 'ssh_password': {UNUSUAL!r}, "
        "'ssh_key_password': 'kp-Unusual-9', 'provider_token': 'tok-Unusual-7'})]\n"
    )
    load_inventory(str(inv))
    record = logging.LogRecord("pyinfra", logging.DEBUG, __file__, 1, "tried %s then %r: %s",
                               (UNUSUAL, "kp-Unusual-9", json.dumps({"x": UNUSUAL})), None)
    assert RedactSecrets().filter(record)
    assert "Unusual" not in record.getMessage() and record.getMessage().count("***") == 3
    with escaping_streams():
        print(f"gpuhost: error: host n1: login as {UNUSUAL} failed (tok-Unusual-7)",
              file=sys.stderr)
    err = capsys.readouterr().err
    assert "Unusual" not in err and "login as *** failed (***)" in err
    assert redact_secrets("abc x") == "abc x"  # values that are not secrets stay


def test_a_secret_written_in_pieces_is_hidden_without_delaying_lines(capsys):
    """A value printed in two writes (print's own pieces, a progress line, a writer that
    streams) was redacted per write, so each half went out. The end of a write that could
    begin a secret is held until the next write tells; a finished line is never held, and
    what is held is written when the stream's writer is done."""
    remember_secrets(["s3cr3t-Pass-42", "token-9xyz"])
    with escaping_streams():
        for piece in ["login as s3cr", "3t-Pass", "-42 failed\n"]:
            sys.stdout.write(piece)
        sys.stdout.write("then s3cr3t-")  # not finished: the next write says
        sys.stdout.write("Passage\n")  # ... it was no secret
        print("ok", "s3", file=sys.stdout)  # print writes 'ok', ' ', 's3', '\n'
        sys.stdout.write("done: to")
        assert capsys.readouterr().out == (
            "login as *** failed\nthen s3cr3t-Passage\nok s3\ndone: "
        )  # complete lines at once; only the possible start of a secret waits
        sys.stderr.write("key token-9x")
        sys.stderr.write("yz!\n")
    captured = capsys.readouterr()
    assert captured.out == "to"  # the held end, written when the command's streams end
    assert captured.err == "key ***!\n"


def test_short_secret_values_are_hidden_in_pairs_only():
    remember_secrets(["x", "ab", "abcd"])
    assert redact_secrets("x ab abcd 'password': 'x'") == "x ab *** 'password': '***'"


def test_a_wrong_ssh_password_value_is_named_not_shown(tmp_path, capsys):
    assert main(["inventory", "check", _inventory(tmp_path, [SECRET, "x"])]) == 2
    err = capsys.readouterr().err
    assert "ssh_password: found a list (not shown)" in err and SECRET not in err


def _provider(tmp_path, text: str) -> str:
    path = tmp_path / "provider.yaml"
    path.write_text(text)
    return str(path)


def test_an_openstack_password_over_plain_http_is_warned_about(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OS_PASSWORD", SECRET)
    base = "type: openstack\nusername: u\nproject_name: p\nauth_url: {}\n"
    load_provider_config(_provider(tmp_path, base.format("http://keystone.example:5000/v3")))
    err = capsys.readouterr().err
    assert "plain http://" in err and "use https://" in err and SECRET not in err
    load_provider_config(_provider(tmp_path, base.format("https://keystone.example:5000/v3")))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", [".inf", "-1", "true", "2.5", "many"])
def test_provider_retries_must_be_a_whole_number(tmp_path, monkeypatch, value):
    monkeypatch.setenv("OS_PASSWORD", SECRET)
    text = "type: openstack\nusername: u\nproject_name: p\nauth_url: https://k/v3\n"
    text += f"retries: {value}\n"
    with pytest.raises(ConfigError, match="retries: found .*, expected a whole number"):
        load_provider_config(_provider(tmp_path, text))


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("username: [a, b]", "username: found ['a', 'b'], expected a non-empty string"),
        ("project_name: null", "project_name: found None, expected a non-empty string"),
        ("interface: null", "interface: found None"),
        ("region: 5", "region: found 5"),
        ("user_domain_name: {x: 1}", "user_domain_name: found {'x': 1}"),
        ("auth_url: ''", "auth_url: found ''"),
        ("regoin: RegionOne", "unknown key(s) for a openstack provider: regoin"),
    ],
)
def test_provider_config_values_are_checked_by_type(tmp_path, monkeypatch, line, named):
    """A list where a string belongs was turned into its text (username "['a', 'b']") and null
    into "None" (interface), a misspelt key was ignored: each is one line now, before any host
    is touched."""
    monkeypatch.setenv("OS_PASSWORD", SECRET)
    base = {"username": "u", "project_name": "p", "auth_url": "https://k/v3"}
    key = line.split(":")[0]
    text = "type: openstack\n" + "".join(f"{k}: {v}\n" for k, v in base.items() if k != key)
    with pytest.raises(ConfigError) as caught:
        load_provider_config(_provider(tmp_path, text + line + "\n"))
    assert named in str(caught.value)


def test_a_command_provider_with_an_unknown_key_is_refused(tmp_path):
    text = "type: command\ncommand: 'true'\ntimeout: 5\n"
    with pytest.raises(ConfigError, match="unknown key.*timeout; expected command, timeout_s"):
        load_provider_config(_provider(tmp_path, text))


@pytest.mark.parametrize(
    "data",
    [
        {"gpuhost_bundle": {"url": f"http://alice:{SECRET}@bundles:99999/b", "key_sha256": "0"}},
        {"gpuhost_proxy": f"ftp://bob:{SECRET}@proxy:3128"},
        {"gpuhost_proxy": {"http": f"http://carol:{SECRET}@proxy:3128", "https": 7}},
    ],
)
def test_a_refused_url_with_a_password_is_echoed_without_it(tmp_path, capsys, data):
    """A bundle URL or proxy with credentials, refused by the inventory check, was echoed back
    whole; its password is now *** in the line (the user stays: it tells which account)."""
    inv = tmp_path / "inv.py"
    inv.write_text(f"gpu = [('n1', {{'ssh_hostname': '127.0.0.1', **{data!r}}})]\n")

    assert main(["inventory", "check", str(inv)]) == 2

    err = capsys.readouterr().err
    assert SECRET not in err and "gpuhost_" in err
