"""What a resumed upgrade run takes from the run it continues (pure).

A run records its options in its journal's header (``option_record``). ``--resume`` continues it
with those options: an option not given again takes its recorded value (a resume without the
run's ``--accept-audit`` validated differently and rolled a healthy host back); an option given
again with another value is refused, naming both. Journals written before an option was
recorded leave that option as given.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from gpuhost.errors import ConfigError

# journal record key -> the upgrade command's parameter name
RECORDED = {
    "canary": "canary",
    "batch": "batch",
    "max_failures": "max_failures",
    "drain": "drain_mode",
    "drain_timeout": "drain_timeout",
    "force": "force",
    "accept_audit": "accept_audit",
    "checks": "checks",
    "accept_checks": "accept_checks",
    "stop_gpu_processes": "stop_gpu_processes",
    "restart": "restart_mode",
    "reboot_timeout": "reboot_timeout",
}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _option(param: str) -> str:
    return "--" + {"drain_mode": "drain", "restart_mode": "restart"}.get(param, param).replace(
        "_", "-"
    )


def option_record(params: Mapping[str, Any]) -> dict[str, Any]:
    """The options a new run records, from the command's parameters."""
    return {key: _plain(params[param]) for key, param in RECORDED.items()}


# (parameter name, recorded value) -> the value as the option would have it; ValueError saying
# why it is not one (the CLI's: the option's own type)
Check = Callable[[str, Any], Any]


def resumed_params(
    recorded: Mapping[str, Any],
    params: Mapping[str, Any],
    explicit: Collection[str],
    source: str,
    check: Check | None = None,
) -> dict[str, Any]:
    """``params`` with every recorded option's value, each checked by ``check`` as the option
    is; ConfigError naming ``source`` when one is not a value of its option, or when an option
    given on the command line (``explicit``: parameter names) differs from what the run
    recorded."""
    merged = dict(params)
    conflicts = []
    for key, param in RECORDED.items():
        if key not in recorded:
            continue
        was = recorded[key]
        if check is not None:
            try:
                check(param, was)
            except ValueError as exc:
                raise ConfigError(
                    f"{source}: the run recorded {_option(param)} {was!r}, which is not a value "
                    f"of that option ({exc}); the journal was changed since the run wrote it"
                ) from None
        if param in explicit and _plain(params[param]) != was:
            conflicts.append(f"{_option(param)} {_plain(params[param])!r} (the run has {was!r})")
            continue
        merged[param] = tuple(was) if isinstance(params[param], tuple) else was
    if conflicts:
        raise ConfigError(
            f"{source}: --resume continues the run with the options it was started with; "
            f"given differently: {'; '.join(conflicts)} (leave them out, or finish or abandon "
            "that run first)"
        )
    return merged
