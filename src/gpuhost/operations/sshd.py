"""Operations for the SSH server that never lock the operator out.

``dropin`` writes gpuhost's sshd settings to ``/etc/ssh/sshd_config.d/00-gpuhost.conf``: the
new file is validated with ``sshd -t`` (together with the rest of the config) before it replaces
the live one, sshd is reloaded (never restarted, so open sessions stay), a dead-man timer on the
host puts the previous config back unless cancelled, and a *fresh* SSH connection from the
controller must succeed before the timer is cancelled; if it fails, the previous config is
restored at once.

``authorized_keys`` adds keys from inventory data and removes unlisted ones only when asked.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator, Mapping, Sequence
from importlib import resources
from io import StringIO
from typing import Any

import gevent
from pyinfra import host, logger
from pyinfra.api import (
    FileUploadCommand,
    FunctionCommand,
    Host,
    OperationValueError,
    State,
    operation,
)

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError
from gpuhost.facts.sshd import (
    DROPIN_DIR,
    DROPIN_PATH,
    SSHD_CONFIG,
    AuthorizedKeyDict,
    AuthorizedKeys,
    SshdConfigFiles,
    key_identity,
    parse_authorized_key,
)
from gpuhost.pyinfra_adapter import connector_arguments, fresh_ssh_login, is_ssh_host

STATE_DIR = "/var/lib/gpuhost/sshd"
CANDIDATE = f"{STATE_DIR}/candidate.conf"
REVERT_SCRIPT_PATH = f"{STATE_DIR}/revert.sh"
REVERT_UNIT = "gpuhost-sshd-revert"
DEFAULT_SERVICE = "ssh.service"
DEFAULT_REVERT_SECONDS = 120
POLICY_FILE = "ssh_policy.yaml"

#: how often and how far apart the fresh-connection check tries (sshd re-execs on reload)
CONFIRM_ATTEMPTS = 5
CONFIRM_DELAY_S = 2.0

HEADER = (
    "# Managed by gpuhost (gpuhost harden); local changes are overwritten.\n"
    "# sshd uses the first value it reads, and this file is included first (00-).\n"
)


# --- policy and rendering (pure) ----------------------------------------------------------------


def load_policy(text: str | None = None) -> dict[str, Any]:
    """The SSH policy (``data/ssh_policy.yaml``), checked for the keys rendering needs."""
    source = f"gpuhost/data/{POLICY_FILE}"
    if text is None:
        text = resources.files("gpuhost.data").joinpath(POLICY_FILE).read_text()
    data = load_yaml(text)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping, found {type(data).__name__}")
    problems = []
    for key in (
        "kex_algorithms",
        "ciphers",
        "macs",
        "host_key_algorithms",
        "pubkey_accepted_algorithms",
    ):
        value = data.get(key)
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            problems.append(f"{key}: expected a non-empty list of algorithm names")
    if not isinstance(data.get("settings"), dict):
        problems.append("settings: expected a mapping of sshd keyword to value")
    if not isinstance(data.get("required_rsa_size"), int):
        problems.append("required_rsa_size: expected an integer")
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return data


def render_dropin(
    policy: Mapping[str, Any],
    permit_root_login: str,
    max_auth_tries: int,
    login_grace_time: int,
    allow_users: Sequence[str] = (),
    allow_groups: Sequence[str] = (),
    extra_lines: Sequence[str] = (),
) -> str:
    """The text of ``00-gpuhost.conf`` for these settings (deterministic, ends with a newline)."""
    lines = [HEADER.rstrip("\n")]
    lines.append(f"PermitRootLogin {permit_root_login}")
    for keyword, value in policy["settings"].items():
        lines.append(f"{keyword} {value}")
    lines.append(f"MaxAuthTries {max_auth_tries}")
    lines.append(f"LoginGraceTime {login_grace_time}")
    if allow_users:
        lines.append("AllowUsers " + " ".join(allow_users))
    if allow_groups:
        lines.append("AllowGroups " + " ".join(allow_groups))
    lines.append("KexAlgorithms " + ",".join(policy["kex_algorithms"]))
    lines.append("Ciphers " + ",".join(policy["ciphers"]))
    lines.append("MACs " + ",".join(policy["macs"]))
    lines.append("HostKeyAlgorithms " + ",".join(policy["host_key_algorithms"]))
    lines.append("PubkeyAcceptedAlgorithms " + ",".join(policy["pubkey_accepted_algorithms"]))
    lines.append(f"RequiredRSASize {policy['required_rsa_size']}")
    if extra_lines:
        lines.append("# extra lines from gpuhost_ssh_extra_config")
        lines.extend(extra_lines)
    return "\n".join(lines) + "\n"


def same_text(a: str | None, b: str | None) -> bool:
    """File contents are equal ignoring trailing whitespace at the end of the file."""
    if a is None or b is None:
        return a is b
    return a.rstrip() == b.rstrip()


def revert_script(service: str = DEFAULT_SERVICE) -> str:
    """Script left on the host that puts back the config saved before the last change."""
    return (
        "#!/bin/sh\n"
        "# Written by gpuhost: restores the sshd config saved before gpuhost's last change and\n"
        "# reloads sshd. Run by the dead-man timer unit " + REVERT_UNIT + ".timer, or by hand.\n"
        f"B={STATE_DIR}\n"
        f'cp -p "$B/sshd_config.previous" {SSHD_CONFIG}\n'
        f'if [ -f "$B/dropin.previous" ]; then cp -p "$B/dropin.previous" {DROPIN_PATH}; '
        f"else rm -f {DROPIN_PATH}; fi\n"
        f"systemctl reload {service}\n"
    )


def _stop_timer(unit: str) -> str:
    return (
        f"systemctl stop {unit}.timer >/dev/null 2>&1 || true; "
        f"systemctl reset-failed {unit}.timer {unit}.service >/dev/null 2>&1 || true"
    )


def apply_script(
    add_include: bool,
    service: str = DEFAULT_SERVICE,
    revert_seconds: int = DEFAULT_REVERT_SECONDS,
) -> str:
    """Shell script that validates the uploaded candidate and, only if valid, makes it live.

    The candidate is tested with ``sshd -t -f`` on a temporary copy of the whole config (main file
    plus every drop-in, with the candidate in place of ours), so what is tested is what sshd will
    read. Before the swap it saves the live files and arms the dead-man timer.
    """
    include_line = f"Include {DROPIN_DIR}/*.conf"
    main_candidate = f"{STATE_DIR}/sshd_config.candidate"
    build_main = (
        f"{{ echo '{include_line}'; cat {SSHD_CONFIG}; }} > {main_candidate}"
        if add_include
        else f"cp -p {SSHD_CONFIG} {main_candidate}"
    )
    install_main = (
        f"install -m 0644 {main_candidate} {SSHD_CONFIG}.gpuhost-new && "
        f"mv -f {SSHD_CONFIG}.gpuhost-new {SSHD_CONFIG}; "
        if add_include
        else ""
    )
    steps = [
        "set -e",
        f"B={STATE_DIR}",
        'T=$(mktemp -d); trap \'rm -rf "$T"\' EXIT; mkdir "$T/d"',
        f'for f in {DROPIN_DIR}/*.conf; do if [ -f "$f" ]; then cp -p "$f" "$T/d/"; fi; done',
        f'cp {CANDIDATE} "$T/d/00-gpuhost.conf"',
        build_main,
        # point the copy's Include at the temporary drop-in directory
        f"sed -e 's#[^[:space:]\"]*sshd_config\\.d/\\*\\.conf#'\"$T\"'/d/*.conf#' {main_candidate} "
        '> "$T/sshd_config"',
        'if ! sshd -t -f "$T/sshd_config"; then '
        "echo 'gpuhost: sshd -t rejected the new SSH config (see above); "
        "the live config was not changed' >&2; "
        f"rm -f {CANDIDATE} {main_candidate}; exit 1; fi",
        f'cp -p {SSHD_CONFIG} "$B/sshd_config.previous"',
        f'if [ -f {DROPIN_PATH} ]; then cp -p {DROPIN_PATH} "$B/dropin.previous"; '
        'else rm -f "$B/dropin.previous"; fi',
        _stop_timer(REVERT_UNIT),
        f"systemd-run --quiet --unit={REVERT_UNIT} --timer-property=AccuracySec=1s "
        f"--on-active={int(revert_seconds)} "
        f"/bin/sh {REVERT_SCRIPT_PATH}",
        f"mkdir -p {DROPIN_DIR}",
        f"install -m 0644 {CANDIDATE} {DROPIN_PATH}.gpuhost-new && "
        f"mv -f {DROPIN_PATH}.gpuhost-new {DROPIN_PATH}",
        install_main.rstrip("; ") if install_main else ":",
        f"if ! systemctl reload {service}; then /bin/sh {REVERT_SCRIPT_PATH} || true; "
        f"{_stop_timer(REVERT_UNIT)}; "
        f"echo 'gpuhost: reloading {service} failed; the previous SSH config was restored' >&2; "
        "exit 1; fi",
    ]
    return "\n".join(steps)


# --- the fresh-connection check (runs on the controller) ----------------------------------------


def _connector_arguments() -> dict[str, Any]:
    """Sudo/su settings of the current operation, for commands run from a FunctionCommand."""
    arguments: Mapping[str, Any] = host.current_op_global_arguments or {}
    return connector_arguments(arguments)


def confirm_fresh_connection(
    state: State,
    host: Host,
    subject: str,
    success_command: str,
    failure_command: str,
    connector_arguments: dict[str, Any] | None = None,
) -> bool:
    """Prove a new SSH login still works; run ``success_command`` then, else ``failure_command``.

    Used as a FunctionCommand after a change that could lock the operator out. Hosts not reached
    over SSH (``@local``, ``@chroot``...) cannot be locked out by it: the check is skipped there.
    """
    arguments = connector_arguments or {}
    if not is_ssh_host(host):
        host.log_styled(f"{subject}: not an SSH host, fresh-connection check skipped", fg="cyan")
        ok, _ = host.run_shell_command(success_command, **arguments)
        return bool(ok)
    error: str | None = "not tried"
    for attempt in range(CONFIRM_ATTEMPTS):
        error = fresh_ssh_login(state, host)
        if error is None:
            break
        if attempt + 1 < CONFIRM_ATTEMPTS:
            gevent.sleep(CONFIRM_DELAY_S)
    if error is None:
        ok, output = host.run_shell_command(success_command, **arguments)
        if not ok:
            host.log_styled(
                f"{subject}: confirmed, but finishing failed: {output.stderr}",
                fg="red",
                log_func=logger.error,
            )
        return bool(ok)
    host.log_styled(
        f"{subject}: a fresh SSH connection failed after the change ({error}); "
        "restoring the previous state",
        fg="red",
        log_func=logger.error,
    )
    ok, output = host.run_shell_command(failure_command, **arguments)
    if not ok:
        host.log_styled(
            f"{subject}: restoring failed too: {output.stderr}; the dead-man timer will retry",
            fg="red",
            log_func=logger.error,
        )
    return False


def confirm_command(subject: str, success_command: str, failure_command: str) -> FunctionCommand:
    """The FunctionCommand that runs ``confirm_fresh_connection`` at this point of an operation."""
    return FunctionCommand(
        confirm_fresh_connection,
        (subject, success_command, failure_command),
        {"connector_arguments": _connector_arguments()},
    )


# --- operations ---------------------------------------------------------------------------------


@operation()
def dropin(
    content: str,
    service: str = DEFAULT_SERVICE,
    revert_seconds: int = DEFAULT_REVERT_SECONDS,
) -> Generator[Any, None, None]:
    """
    Make ``content`` the live ``/etc/ssh/sshd_config.d/00-gpuhost.conf``, safely.

    + content: full text of the drop-in (see ``render_dropin``)
    + service: systemd unit reloaded after the change
    + revert_seconds: the dead-man timer puts the previous config back after this many seconds
      unless a fresh SSH connection confirmed the change first

    Also makes sure ``sshd_config`` includes the drop-ins before its own settings.

    **Example:**

    .. code:: python

        sshd.dropin(name="Harden sshd", content=render_dropin(policy, "no", 3, 30))
    """
    files = host.get_fact(SshdConfigFiles)
    if not files["main_present"]:
        raise OperationValueError(f"{SSHD_CONFIG} is missing: is openssh-server installed?")
    add_include = not files["includes_dropins_first"]
    if same_text(files["dropin"], content) and not add_include:
        host.noop(f"{DROPIN_PATH} is already up to date")
        return
    yield f"mkdir -p -m 0700 {STATE_DIR}"
    yield FileUploadCommand(StringIO(content), CANDIDATE)
    yield FileUploadCommand(StringIO(revert_script(service)), REVERT_SCRIPT_PATH)
    yield apply_script(add_include, service, revert_seconds)
    yield confirm_command(
        "sshd config",
        f"{_stop_timer(REVERT_UNIT)}; rm -f {CANDIDATE} {STATE_DIR}/sshd_config.candidate",
        f"/bin/sh {REVERT_SCRIPT_PATH}; {_stop_timer(REVERT_UNIT)}",
    )


def _checked_keys(user: str, keys: Sequence[str]) -> list[AuthorizedKeyDict]:
    parsed = []
    for index, text in enumerate(keys):
        key = parse_authorized_key(text) if isinstance(text, str) else None
        if key is None:
            raise OperationValueError(
                f"gpuhost_ssh_authorized_keys[{user!r}][{index}]: expected an OpenSSH public key "
                f"line like 'ssh-ed25519 AAAA... comment', found {str(text)[:60]!r}"
            )
        parsed.append(key)
    return parsed


@operation()
def authorized_keys(
    user: str,
    keys: Sequence[str],
    remove_unlisted: bool = False,
) -> Generator[Any, None, None]:
    """
    Make sure ``user``'s ``~/.ssh/authorized_keys`` holds ``keys``.

    + user: account whose keys are managed (must exist)
    + keys: public key lines (``ssh-ed25519 AAAA... comment``); keys match on type and key data
    + remove_unlisted: also remove keys that are not in ``keys``. The new file only stays if a fresh
      SSH connection still works afterwards; otherwise the previous file is put back.

    **Example:**

    .. code:: python

        sshd.authorized_keys(name="Keys of ops", user="ops", keys=["ssh-ed25519 AAAA... ops"])
    """
    wanted = _checked_keys(user, keys)
    facts = host.get_fact(AuthorizedKeys, user=user)
    if not facts["exists"] or not facts["home"]:
        raise OperationValueError(f"user {user!r} does not exist on the host")
    present = {key_identity(key) for key in facts["keys"]}
    wanted_ids = {key_identity(key) for key in wanted}
    missing: list[AuthorizedKeyDict] = []
    for key in wanted:
        if key_identity(key) not in present | {key_identity(k) for k in missing}:
            missing.append(key)
    unlisted = [k for k in facts["keys"] if key_identity(k) not in wanted_ids]
    if not missing and not (remove_unlisted and unlisted):
        host.noop(f"authorized keys of {user} are already up to date")
        return

    ssh_dir = f"{facts['home']}/.ssh"
    path = f"{ssh_dir}/authorized_keys"
    owner = f"{shlex.quote(user)}:{shlex.quote(facts['group'] or user)}"
    yield (
        f"install -d -m 0700 -o {shlex.quote(user)} -g {shlex.quote(facts['group'] or user)} "
        f"{shlex.quote(ssh_dir)}"
    )
    if remove_unlisted and unlisted:
        kept = [k["line"] for k in facts["keys"] if key_identity(k) in wanted_ids]
        content = "\n".join(kept + [k["line"] for k in missing]) + "\n"
        new, backup = f"{path}.gpuhost-new", f"{path}.gpuhost-previous"
        yield f"cp -p {shlex.quote(path)} {shlex.quote(backup)}"
        yield FileUploadCommand(StringIO(content), new)
        yield (
            f"chown {owner} {shlex.quote(new)} && chmod 0600 {shlex.quote(new)} && "
            f"mv -f {shlex.quote(new)} {shlex.quote(path)}"
        )
        yield confirm_command(
            f"authorized keys of {user}",
            "true",
            f"cp -p {shlex.quote(backup)} {shlex.quote(path)}",
        )
        return
    lines = " ".join(shlex.quote(k["line"]) for k in missing)
    quoted = shlex.quote(path)
    # a last line without its newline would otherwise swallow the first new key
    yield f'if [ -s {quoted} ] && [ -n "$(tail -c1 {quoted})" ]; then echo >> {quoted}; fi'
    yield f"printf '%s\\n' {lines} >> {quoted}"
    yield f"chown {owner} {shlex.quote(path)} && chmod 0600 {shlex.quote(path)}"
