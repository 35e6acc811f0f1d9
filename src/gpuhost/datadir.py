"""Where gpuhost's data comes from: the files shipped in the package, or the overlay
``gpuhost data update`` wrote into this machine's data directory (docs/knowledge.md).

The data directory is ``$GPUHOST_DATA_DIR`` when set, else ``/var/lib/gpuhost/data`` for root,
else ``$XDG_DATA_HOME/gpuhost`` (``~/.local/share/gpuhost``). An update writes whole data files
there (``matrix.yaml``, ``advisories.yaml``, ``wheels.yaml``, ``gpu_catalog.yaml``, each
validated by the same loader as the shipped one) and ``meta.json`` last: ``{"date", "origin",
"sources"}``. The overlay is used only while its date is not older than the shipped data's (a
newer gpuhost release wins), and :func:`data_path` is the one place that decides, for every
loader.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.redaction import redact_url
from gpuhost.safeio import owner_problem, read_regular
from gpuhost.statedir import unsafe_folder

ENV = "GPUHOST_DATA_DIR"
MAX_AGE_ENV = "GPUHOST_DATA_MAX_AGE_DAYS"
DEFAULT_MAX_AGE_DAYS = 120
ROOT_DIR = Path("/var/lib/gpuhost/data")
FILES = ("matrix.yaml", "advisories.yaml", "wheels.yaml", "gpu_catalog.yaml")
META = "meta.json"
_UPDATED_RE = re.compile(r'^updated:\s*"?(\d{4}-\d{2}-\d{2})"?\s*$', re.MULTILINE)
MAX_META_BYTES = 1024 * 1024
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def data_dir() -> Path:
    """This machine's data directory (it may not exist yet)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return ROOT_DIR
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "gpuhost"


def use_data_dir(folder: str | None) -> Path:
    """``--data-dir``: make ``folder`` (when given) the data directory of this process (through
    ``$GPUHOST_DATA_DIR``, so every reader sees it); the data directory."""
    if folder:
        os.environ[ENV] = folder
    return data_dir()


def shipped_path(name: str) -> str:
    return str(resources.files("gpuhost") / "data" / name)


def shipped_date() -> str | None:
    """The shipped matrix's ``updated`` date (when its facts were last checked)."""
    try:
        text = Path(shipped_path("matrix.yaml")).read_text(encoding="utf-8")
    except OSError:
        return None
    m = _UPDATED_RE.search(text)
    return m.group(1) if m else None


def read_meta(folder: Path) -> dict[str, Any] | None:
    """``meta.json`` of an overlay folder; None when absent or not a valid one (read through
    ``safeio.read_regular``: a FIFO, a device such as /dev/zero or a link there, or a file of
    more than ``MAX_META_BYTES`` is never read)."""
    try:
        raw = read_regular(
            folder / META, "the data's meta.json", follow=False, limit=MAX_META_BYTES
        )
        meta = json.loads(raw.decode("utf-8"))
    except (ConfigError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(meta, dict) or not _is_date(meta.get("date")):
        return None
    return meta


def overlay_problem(today: datetime.date | None = None) -> str | None:
    """One line when the data directory holds an update that is not used, and why: the folder
    (or one above it) or one of its files could be changed by someone other than this user or
    root (the state folder's StrictModes rule, ``statedir.unsafe_folder``: anyone could hide
    bulletins from every audit), a file is not a regular one (a FIFO, a device, a link),
    ``meta.json`` is not valid, or it is dated after today (it would outrank every later
    release's data and never look old). None when there is no update or it is fine."""
    folder = data_dir()
    if not os.path.lexists(folder / META):
        return None
    where = f"data directory {folder}"
    found = unsafe_folder(folder)
    if found:
        unsafe, problem = found
        at = "" if unsafe == folder else f"{unsafe} "
        return (
            f"warning: {where}: {at}is {problem}; its update is not used, the shipped data is "
            f"(fix: chown {os.geteuid()} and chmod go-w it, or set ${ENV} to a folder of yours)"
        )
    for name in (META, *FILES):
        bad = _file_problem(folder / name)
        if bad:
            return (
                f"warning: {where}: {name} {bad}; its update is not used, the shipped data is"
            )
    meta = read_meta(folder)
    if meta is None:
        return (
            f"warning: {where}: {META} is not JSON with a YYYY-MM-DD date; its update is not "
            "used, the shipped data is (fix: run gpuhost data update)"
        )
    today = today or datetime.date.today()
    if datetime.date.fromisoformat(meta["date"]) > today + datetime.timedelta(days=1):
        return (
            f"warning: {where}: {META} is dated {meta['date']}, after today ({today}); its "
            "update is not used, the shipped data is (fix: run gpuhost data update)"
        )
    return None


def _file_problem(path: Path) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a link, FIFO or device)"
    problem = owner_problem(info)
    return f"is {problem}" if problem else None


def _is_date(value: Any) -> bool:
    """A calendar date written YYYY-MM-DD (2026-13-45 is not one: compared as text it would
    make the overlay win over every newer release and never look stale)."""
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def active_overlay() -> Path | None:
    """The data directory when it holds an overlay at least as new as the shipped data."""
    folder = data_dir()
    meta = read_meta(folder)
    if meta is None or overlay_problem() is not None:
        return None
    shipped = shipped_date()
    return folder if shipped is None or str(meta["date"]) >= shipped else None


def data_path(name: str) -> str:
    """The file a loader reads for data file ``name``: the overlay's, else the shipped one."""
    folder = active_overlay()
    if folder is not None and (folder / name).is_file():
        return str(folder / name)
    return shipped_path(name)


def data_info() -> dict[str, Any]:
    """``{"date", "origin"}`` of the data in use: what every report states."""
    folder = active_overlay()
    if folder is not None:
        meta = read_meta(folder) or {}
        origin = f"update of {meta.get('date')} in {folder}"
        if meta.get("origin"):  # an update before passwords were left out may hold one
            origin = redact_url(f"{origin} ({meta['origin']})")
        return {"date": meta.get("date"), "origin": origin}
    return {"date": shipped_date(), "origin": "shipped with gpuhost"}


def described(info: Mapping[str, Any]) -> str:
    """``DATE (ORIGIN)`` of :func:`data_info` for text: ``unknown`` when the data has no date
    (JSON says ``null``, the Prometheus textfile an empty label), never Python's None."""
    return f"{info['date'] or 'unknown'} ({info['origin']})"


def max_age_days() -> int:
    raw = os.environ.get(MAX_AGE_ENV, "")
    return int(raw) if raw.isdigit() else DEFAULT_MAX_AGE_DAYS


def staleness(today: datetime.date | None = None, limit: int | None = None) -> str | None:
    """One line when the data in use is older than ``limit`` days (default
    ``$GPUHOST_DATA_MAX_AGE_DAYS``, else 120), else None."""
    info = data_info()
    limit = max_age_days() if limit is None else limit
    try:
        date = datetime.date.fromisoformat(str(info["date"]))
    except ValueError:
        return None
    age = ((today or datetime.date.today()) - date).days
    if age <= limit:
        return None
    return (
        f"warning: gpuhost's data is {age} days old ({info['date']}, {info['origin']}; older "
        f"than {limit} days): run `gpuhost data update` (limit: ${MAX_AGE_ENV})"
    )


def status_lines(folder: Path, as_json: bool) -> list[str]:
    """``gpuhost data status``: the data in use (date, origin), the data directory, the file
    read for each name, and the staleness warning if any (or one JSON document)."""
    info = data_info()
    files = {name: data_path(name) for name in FILES}
    stale = staleness()
    unused = overlay_problem()
    if as_json:
        doc = {
            "data": info,
            "data_dir": str(folder),
            "files": files,
            "stale": stale,
            "update_not_used": unused,
        }
        return [json.dumps(doc, indent=2)]
    lines = [f"data: {described(info)}", f"data directory: {folder}"]
    lines.extend(f"  {name}: {path}" for name, path in files.items())
    return [*lines, *filter(None, [unused, stale])]
