"""NVIDIA security advisories as data (``data/advisories.yaml``, written by
``gpuhost matrix advisories-sync`` from NVIDIA's CSAF bulletins) and the judgement of a driver,
container toolkit, CUDA Toolkit or GPU Operator version against them.

Rules (ids shared by ``matrix check``, ``profile verify`` and ``gpuhost audit``):

- ``security.driver``: the driver is older than the first fixed version a bulletin names for the
  driver's own branch (error at CVSS >= ``error_at_cvss``, else warning); or the branch is older
  than the branches a bulletin fixes and gets no fix at all (warning);
- ``security.container-toolkit``: the container toolkit is older than a bulletin's fixed version;
- ``security.cuda-toolkit``: the CUDA Toolkit is older than the first fixed release a CUDA
  Toolkit bulletin names for a CVE affecting it on Linux (``matrix check --cuda``, the audit on
  every installed toolkit);
- ``security.gpu-operator``: the GPU Operator is older than the fixed release a container
  toolkit bulletin names for it (``matrix check --gpu-operator`` only: nothing on a node
  reliably shows the Operator's release; see docs/knowledge.md).

These findings are the security exposure, an answer of its own: :func:`exposure` gives it with its
own verdict, and no compatibility verdict counts it (``gpuhost.findings.is_security``).
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from gpuhost.datadir import data_path
from gpuhost.errors import MatrixError, VersionError
from gpuhost.findings import ERROR, WARNING, Finding
from gpuhost.findings import verdict as verdict_of
from gpuhost.matrix.yamlfile import read_mapping
from gpuhost.versions import Version, driver_branch, parse_version

COMPONENTS = ("driver", "container-toolkit", "cuda-toolkit")
#: a bulletin id: one word gpuhost may put into a URL or a file name (NVIDIA's are digits)
BULLETIN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
CVE_ID_RE = re.compile(r"CVE-\d{4}-\d{4,9}")
_HTTP_URL_RE = re.compile(r"https://[A-Za-z0-9.-]+(?::\d{1,5})?/[!-~]*")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Cve:
    id: str
    cvss: float | None  # CVSS base score; None = the bulletin gives none
    branches: tuple[int, ...] = ()  # driver branches it affects (driver bulletins)
    fixed: str | None = None  # its first fixed CUDA Toolkit (CUDA bulletins; None: none named)
    toolkit: bool = True  # affects the container toolkit (container-toolkit bulletins)
    gpu_operator: bool = False  # affects the GPU Operator (container-toolkit bulletins)


@dataclass(frozen=True)
class Advisory:
    """One NVIDIA security bulletin, reduced to Linux drivers or the container toolkit."""

    id: str
    component: str  # "driver" | "container-toolkit"
    title: str
    date: str
    url: str
    csaf: str
    highest_cvss: float | None
    # driver: "535" -> "535.274.02"; "toolkit" -> "1.17.8"; "gpu-operator" -> "25.3.2";
    # "cuda" -> "13.1.0" (the newest of the bulletin's fixed CUDA releases)
    fixed: dict[str, str]
    cves: tuple[Cve, ...]
    confidence: str

    def fixed_branches(self) -> list[int]:
        return sorted(int(b) for b in self.fixed if b.isdigit())


@dataclass(frozen=True)
class Advisories:
    path: str
    error_at_cvss: float
    rows: tuple[Advisory, ...]


def default_advisories_path() -> str:
    """The advisories in use: the data update's overlay, else the shipped file."""
    return data_path("advisories.yaml")


def read_raw(path: str) -> dict[str, Any]:
    return read_mapping(path, "error_at_cvss and advisories")


def load_advisories(path: str | None = None) -> Advisories:
    """The advisories file (default: the shipped one, cached); MatrixError lists bad fields."""
    if path is None:
        return _default()
    return _load(path)


@functools.lru_cache(maxsize=1)
def _default() -> Advisories:
    return _load(default_advisories_path())


def _load(path: str) -> Advisories:
    data = read_raw(path)
    problems: list[str] = []
    threshold = data.get("error_at_cvss")
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool):
        problems.append(f"error_at_cvss: expected a number, found {threshold!r}")
        threshold = 7.0
    rows = []
    raw_rows = data.get("advisories", [])
    seen: dict[str, int] = {}
    for i, r in enumerate(raw_rows if isinstance(raw_rows, list) else []):
        where = f"advisories[{i}]"
        try:
            row = _row(r, where)
        except (KeyError, TypeError, ValueError, VersionError, AttributeError) as exc:
            problems.append(f"{where}: {exc}")
            continue
        if row.id in seen:
            problems.append(f"{where}: id {row.id!r} is already advisories[{seen[row.id]}]")
        seen.setdefault(row.id, i)
        rows.append(row)
    if not isinstance(raw_rows, list):
        problems.append("advisories: expected a list")
    if problems:
        raise MatrixError(path, problems)
    return Advisories(path, float(threshold), tuple(rows))


def row_problems(r: Any, today: datetime.date | None = None) -> list[str]:
    """What makes a bulletin row unfit to install or judge with (field: found, expected),
    before any of its fields is put into a path, a URL or a report: its id (one word: no '/',
    no '..'), its date (a calendar date, not after tomorrow), its URLs (https), its CVE ids
    and scores. The caller checks duplicates; :func:`_row` the versions and component."""
    if not isinstance(r, dict):
        return [f"found {type(r).__name__}, expected a mapping"]
    problems = []
    bid = r.get("id")
    if not isinstance(bid, str) or not BULLETIN_ID_RE.fullmatch(bid):
        problems.append(f"id: found {bid!r:.80}, expected one word of letters, digits, - or _")
    date = r.get("date")
    if not _is_past_date(date, today):
        problems.append(f"date: found {date!r:.40}, expected a YYYY-MM-DD date not in the future")
    for key in ("url", "csaf"):
        url = r.get(key)
        if not isinstance(url, str) or not _HTTP_URL_RE.fullmatch(url) or ".." in url:
            problems.append(f"{key}: found {url!r:.120}, expected an https URL")
    cves = r.get("cves")
    if not isinstance(cves, list) or not cves:
        return [*problems, f"cves: found {cves!r:.80}, expected a list of CVEs"]
    for i, cve in enumerate(cves):
        cve_id = cve.get("id") if isinstance(cve, dict) else None
        if not isinstance(cve_id, str) or not CVE_ID_RE.fullmatch(cve_id):
            problems.append(f"cves[{i}].id: found {cve_id!r:.60}, expected CVE-YYYY-NNNN")
        score = cve.get("cvss") if isinstance(cve, dict) else None
        if score is not None and not _is_score(score):
            problems.append(f"cves[{i}].cvss: found {score!r:.40}, expected a number 0 to 10")
    high = r.get("highest_cvss")
    if high is not None and not _is_score(high):
        problems.append(f"highest_cvss: found {high!r:.40}, expected a number 0 to 10")
    return problems


def _is_past_date(value: Any, today: datetime.date | None) -> bool:
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        return False
    try:
        day = datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return day <= (today or datetime.date.today()) + datetime.timedelta(days=1)


def _is_score(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= 10
    )


def _row(r: dict[str, Any], where: str) -> Advisory:
    problems = row_problems(r)
    if problems:
        raise ValueError("; ".join(problems))
    if r["component"] not in COMPONENTS:
        raise ValueError(f"component {r['component']!r} is not one of {', '.join(COMPONENTS)}")
    for key in ("url", "csaf", "confidence"):
        if not isinstance(r.get(key), str) or not r[key]:
            raise ValueError(f"{key} missing: every row names its source and confidence")
    fixed = {str(k): str(v) for k, v in (r.get("fixed") or {}).items()}
    for k, v in fixed.items():
        parse_version(v, field=f"{where}.fixed.{k}")
    cves = tuple(_cve(c, f"{where}.cves[{j}]") for j, c in enumerate(r["cves"]))
    high = r.get("highest_cvss")
    return Advisory(
        id=str(r["id"]),
        component=str(r["component"]),
        title=str(r["title"]),
        date=str(r["date"]),
        url=str(r["url"]),
        csaf=str(r["csaf"]),
        highest_cvss=None if high is None else float(high),
        fixed=fixed,
        cves=cves,
        confidence=str(r["confidence"]),
    )


def _cve(c: dict[str, Any], where: str) -> Cve:
    fixed = c.get("fixed")
    if fixed is not None:
        parse_version(str(fixed), field=f"{where}.fixed")
    flags = {k: c.get(k, default) for k, default in (("toolkit", True), ("gpu_operator", False))}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{where}.{key}: expected true or false, found {value!r}")
    return Cve(
        str(c["id"]),
        None if c.get("cvss") is None else float(c["cvss"]),
        tuple(int(b) for b in c.get("branches", [])),
        None if fixed is None else str(fixed),
        flags["toolkit"],
        flags["gpu_operator"],
    )


# --------------------------------------------------------------------------------------------
# judging


@dataclass(frozen=True)
class Hit:
    advisory: Advisory
    cves: tuple[Cve, ...]
    fixed: str | None  # first fixed version for this host (None: no fix on its branch)


def driver_hits(advs: Advisories, driver: str) -> tuple[list[Hit], list[Advisory]]:
    """(bulletins whose fix for the driver's branch is newer than ``driver``, bulletins that fix
    newer branches but not the driver's own)."""
    v = parse_version(driver, field="driver")
    branch = driver_branch(v)
    hits, unpatched = [], []
    for adv in advs.rows:
        if adv.component != "driver":
            continue
        fixed = adv.fixed.get(str(branch))
        if fixed is not None:
            if v < parse_version(fixed, field="fixed"):
                cves = tuple(c for c in adv.cves if not c.branches or branch in c.branches)
                hits.append(Hit(adv, cves, fixed))
        elif adv.fixed_branches() and branch < max(adv.fixed_branches()):
            unpatched.append(adv)
    return hits, unpatched


@dataclass(frozen=True)
class BranchFix:
    """What NVIDIA's driver bulletins say about one branch: ``first_fixed``, the oldest version
    every bulletin naming the branch calls fixed (None when none names it), and ``unfixed``,
    the bulletins that fix newer branches but never this one (its drivers stay affected)."""

    branch: int
    first_fixed: str | None
    bulletins: tuple[Advisory, ...]  # the bulletins whose fixes set first_fixed
    unfixed: tuple[Advisory, ...]


def branch_fix(advs: Advisories, branch: int) -> BranchFix:
    """The first R``branch`` driver no known bulletin affects (``driver_hits`` finds none in it),
    or the bulletins that leave the branch without a fix."""
    first: str | None = None
    naming: list[Advisory] = []
    unfixed: list[Advisory] = []
    for adv in advs.rows:
        if adv.component != "driver":
            continue
        fixed = adv.fixed.get(str(branch))
        if fixed is not None:
            naming.append(adv)
            if first is None or parse_version(fixed, field="fixed") > parse_version(
                first, field="fixed"
            ):
                first = fixed
        elif adv.fixed_branches() and branch < max(adv.fixed_branches()):
            unfixed.append(adv)
    return BranchFix(branch, first, tuple(naming), tuple(unfixed))


def toolkit_hits(advs: Advisories, version: str) -> list[Hit]:
    v = parse_version(version, field="container toolkit")
    hits = []
    for adv in advs.rows:
        fixed = adv.fixed.get("toolkit")
        if adv.component == "container-toolkit" and fixed and v < parse_version(fixed, field="f"):
            hits.append(Hit(adv, tuple(c for c in adv.cves if c.toolkit), fixed))
    return hits


def cuda_hits(advs: Advisories, version: str) -> list[Hit]:
    """CUDA Toolkit bulletins with a CVE whose first fixed release on Linux is newer than
    ``version`` (a CVE naming no fixed release affects every version)."""
    v = parse_version(version, field="--cuda")
    hits = []
    for adv in advs.rows:
        if adv.component != "cuda-toolkit":
            continue
        cves = tuple(c for c in adv.cves if c.fixed is None or v < _v(c.fixed))
        if cves:
            named = [c.fixed for c in cves if c.fixed is not None]
            fixed = max(named, key=_v) if len(named) == len(cves) else None
            hits.append(Hit(adv, cves, fixed))
    return hits


def operator_version(version: str) -> Version:
    """A GPU Operator release as its tags and bulletins spell it ("v25.3.2" or "25.3.2")."""
    text = version[1:] if version.startswith("v") and len(version) > 1 else version
    return parse_version(text, field="--gpu-operator")


def operator_hits(advs: Advisories, version: str) -> list[Hit]:
    """Container toolkit bulletins whose fixed GPU Operator release is newer than ``version``."""
    v = operator_version(version)
    hits = []
    for adv in advs.rows:
        fixed = adv.fixed.get("gpu-operator")
        if adv.component == "container-toolkit" and fixed and v < _v(fixed):
            hits.append(Hit(adv, tuple(c for c in adv.cves if c.gpu_operator), fixed))
    return hits


def _v(version: str) -> Version:
    return parse_version(version, field="fixed")


def _worst(hits: list[Hit]) -> float | None:
    scores = [c.cvss for h in hits for c in h.cves if c.cvss is not None]
    return max(scores) if scores else None


def _cve_text(hits: list[Hit], limit: int = 6) -> str:
    ids = [c.id for h in hits for c in h.cves]
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _bulletins(advs: list[Advisory]) -> str:
    return ", ".join(f"{a.id} ({a.date})" for a in advs)


def _newest_fixes(advs: Advisories) -> str:
    """The newest driver bulletin's fixed version per branch (where to go from an old branch)."""
    newest = max((a for a in advs.rows if a.component == "driver"), key=lambda a: a.date)
    return ", ".join(f"R{b} >= {v}" for b, v in newest.fixed.items())


@dataclass(frozen=True)
class Exposure:
    """The security answer for some versions: what was judged, and the bulletins that affect it."""

    checked: tuple[str, ...]  # "driver 535.161.07", "nvidia-container-toolkit 1.17.3"
    findings: tuple[Finding, ...]

    @property
    def verdict(self) -> str:
        """"error" if a bulletin at CVSS >= error_at_cvss affects a version, "warning" for a
        lower score or a branch without a fix, "ok" when none is known to (or nothing was given)."""
        return verdict_of(self.findings)

    def to_json(self) -> dict[str, Any]:
        """The ``security`` object of ``matrix check --json`` and ``profile verify --json``."""
        return {
            "verdict": self.verdict,
            "checked": list(self.checked),
            "advisories": [f.to_json() for f in self.findings],
        }


def exposure(
    advs: Advisories,
    *,
    driver: str | None = None,
    container_toolkit: str | None = None,
    cuda: str | None = None,
    gpu_operator: str | None = None,
) -> Exposure:
    """The security exposure of a driver, container toolkit, CUDA Toolkit and/or GPU Operator."""
    named = (
        ("driver", driver),
        ("nvidia-container-toolkit", container_toolkit),
        ("CUDA Toolkit", cuda),
        ("GPU Operator", gpu_operator),
    )
    checked = [f"{what} {version}" for what, version in named if version is not None]
    found = security_findings(
        advs,
        driver=driver,
        container_toolkit=container_toolkit,
        cuda=cuda,
        gpu_operator=gpu_operator,
    )
    return Exposure(tuple(checked), tuple(found))


def security_findings(
    advs: Advisories,
    *,
    driver: str | None = None,
    container_toolkit: str | None = None,
    cuda: str | None = None,
    gpu_operator: str | None = None,
) -> list[Finding]:
    """``security.driver`` / ``security.container-toolkit`` / ``security.cuda-toolkit`` /
    ``security.gpu-operator`` findings for the given versions."""
    out: list[Finding] = []
    if driver is not None:
        out += _driver(advs, driver)
    if container_toolkit is not None:
        out += _toolkit(advs, container_toolkit)
    if cuda is not None:
        out += _cuda(advs, cuda)
    if gpu_operator is not None:
        out += _operator(advs, gpu_operator)
    return out


def _severity(advs: Advisories, score: float | None) -> str:
    return ERROR if score is not None and score >= advs.error_at_cvss else WARNING


def _driver(advs: Advisories, driver: str) -> list[Finding]:
    hits, unpatched = driver_hits(advs, driver)
    branch = driver_branch(driver)
    out = []
    if hits:
        score = _worst(hits)
        need = max((h.fixed for h in hits if h.fixed), key=lambda x: parse_version(x, field="f"))
        out.append(
            Finding(
                "security.driver",
                _severity(advs, score),
                f"driver {driver} (R{branch}) is affected by NVIDIA security bulletin(s) "
                f"{_bulletins([h.advisory for h in hits])}: {_cve_text(hits)} (highest CVSS "
                f"{score if score is not None else 'not given'}); the first R{branch} driver "
                f"fixing them all is {need}; fix: upgrade the driver to >= {need}",
                source=hits[-1].advisory.url,
                found=f"driver {driver}",
                expected=f"driver >= {need} on R{branch} (NVIDIA security bulletins)",
                fix=f"upgrade the driver to >= {need}",
            )
        )
    if unpatched:
        cves = [Hit(a, tuple(a.cves), None) for a in unpatched]
        score = _worst(cves)
        out.append(
            Finding(
                "security.driver",
                WARNING,
                f"R{branch} gets no fix in NVIDIA security bulletin(s) {_bulletins(unpatched)} "
                f"({_cve_text(cves)}; highest CVSS "
                f"{score if score is not None else 'not given'}), which fix newer branches "
                f"only; fix: move to a branch NVIDIA still fixes ({_newest_fixes(advs)})",
                source=unpatched[-1].url,
                found=f"driver {driver} (R{branch})",
                expected="a driver branch NVIDIA's newest bulletins fix",
                fix=f"move to a branch NVIDIA still fixes ({_newest_fixes(advs)})",
            )
        )
    return out


def _affected(subject: str, hits: list[Hit], score: float | None) -> str:
    """"<subject> is affected by NVIDIA security bulletin(s) <ids>: <CVEs> (highest CVSS x)"."""
    return (
        f"{subject} is affected by NVIDIA security bulletin(s) "
        f"{_bulletins([h.advisory for h in hits])}: {_cve_text(hits)} (highest CVSS "
        f"{score if score is not None else 'not given'})"
    )


def _toolkit(advs: Advisories, version: str) -> list[Finding]:
    hits = toolkit_hits(advs, version)
    if not hits:
        return []
    score = _worst(hits)
    need = max((h.fixed for h in hits if h.fixed), key=lambda x: parse_version(x, field="f"))
    return [
        Finding(
            "security.container-toolkit",
            _severity(advs, score),
            _affected(f"NVIDIA Container Toolkit {version}", hits, score)
            + f"; fixed in {need}; fix: upgrade nvidia-container-toolkit to >= {need}",
            source=hits[-1].advisory.url,
            found=f"nvidia-container-toolkit {version}",
            expected=f"nvidia-container-toolkit >= {need} (NVIDIA security bulletins)",
            fix=f"upgrade nvidia-container-toolkit to >= {need}",
        )
    ]


def _cuda(advs: Advisories, version: str) -> list[Finding]:
    hits = cuda_hits(advs, version)
    if not hits:
        return []
    score = _worst(hits)
    need = max((h.fixed for h in hits if h.fixed), key=_v, default=None)
    fix = f"upgrade the CUDA Toolkit to >= {need}" if need else "see the bulletins"
    release = parse_version(version, field="--cuda").release
    same_minor = any(
        c.fixed is not None and _v(c.fixed).release[:2] == release for h in hits for c in h.cves
    )
    read_as = (
        f" (read as its GA release {version}.0: a fix is in a {version} update; give the "
        f"update installed, e.g. {version}.1)"
        if len(release) == 2 and same_minor
        else ""
    )
    return [
        Finding(
            "security.cuda-toolkit",
            _severity(advs, score),
            _affected(f"CUDA Toolkit {version}{read_as}", hits, score)
            + (f"; fixed in {need}" if need else "; a CVE names no fixed release")
            + f"; fix: {fix}",
            source=hits[-1].advisory.url,
            found=f"CUDA Toolkit {version}",
            expected=f"CUDA Toolkit >= {need} (NVIDIA security bulletins)"
            if need
            else "a CUDA Toolkit no NVIDIA bulletin names as affected",
            fix=fix,
        )
    ]


def _operator(advs: Advisories, version: str) -> list[Finding]:
    hits = operator_hits(advs, version)
    if not hits:
        return []
    score = _worst(hits)
    need = max((h.fixed for h in hits if h.fixed), key=_v)
    return [
        Finding(
            "security.gpu-operator",
            _severity(advs, score),
            _affected(f"NVIDIA GPU Operator {version}", hits, score)
            + f"; fixed in {need}; fix: upgrade the GPU Operator to >= {need} (helm upgrade ... "
            f"nvidia/gpu-operator --version v{need})",
            source=hits[-1].advisory.url,
            found=f"GPU Operator {version}",
            expected=f"GPU Operator >= {need} (NVIDIA security bulletins)",
            fix=f"upgrade the GPU Operator to >= {need}",
        )
    ]
