"""Issue 24: ``resolve`` never proposes what ``check`` condemns. The minimum driver it proposes
is the first one NVIDIA's security bulletins (data/advisories.yaml) call fixed on its branch, a
branch they leave without a fix is not proposed, and with a framework the cuDNN proposed is the
one its wheel pins (data/wheels.yaml). Every expectation is read from the project's data."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpuhost.matrix import Matrix, NoCompatibleSet, check_stack, resolve_stack, verdict
from gpuhost.matrix.advisories import (
    Advisory,
    branch_fix,
    driver_hits,
    exposure,
    load_advisories,
)
from gpuhost.matrix.lookup import default_torch_variant, eol_passed, find_torch, wheel_release
from gpuhost.versions import Version, parse_version

AS_OF = dt.date(2026, 11, 22)
ADVS = load_advisories()


def V(text: str) -> Version:
    return parse_version(text, field="test")


def _gpu_names(matrix: Matrix) -> list[str]:
    return sorted({g.model for g in matrix.gpus})


def test_no_resolved_driver_is_affected_by_a_known_bulletin(matrix: Matrix) -> None:
    """Every GPU model of the matrix: the proposed minimum driver is hit by no bulletin, and
    its branch is not one a bulletin leaves without a fix."""
    resolved = 0
    for name in _gpu_names(matrix):
        try:
            res = resolve_stack(matrix, gpus=[name], as_of=AS_OF)
        except NoCompatibleSet:
            continue  # Jetson boards: no set proposed at all
        resolved += 1
        hits, unpatched = driver_hits(ADVS, res.driver_min_version)
        assert (hits, unpatched) == ([], []), (name, res.driver_min_version)
        assert exposure(ADVS, driver=res.driver_min_version).verdict == "ok"
    assert resolved > 10


@pytest.mark.parametrize(
    ("gpu", "earlier_answer"),
    [("V100", "580.65.06"), ("H100", "595.45.04"), ("L4", "595.45.04")],
)
def test_the_minimum_is_the_first_fixed_driver(matrix: Matrix, gpu: str, earlier_answer: str):
    """Issue 24's examples: V100 got R580 >= 580.65.06, H100/L4 R595 >= 595.45.04, drivers
    bulletins in data/advisories.yaml name as affected."""
    assert driver_hits(ADVS, earlier_answer)[0], "the data names the earlier answer as affected"
    res = resolve_stack(matrix, gpus=[gpu], as_of=AS_OF)
    fixed = branch_fix(ADVS, res.driver_branch).first_fixed
    assert fixed is not None and res.driver_min_version == fixed
    assert V(res.driver_min_version) > V(earlier_answer)
    assert any(f"minimum version {fixed} (the first R{res.driver_branch}" in line
               for line in res.explain)


def test_a_branch_left_without_a_fix_is_not_proposed(matrix: Matrix) -> None:
    """A bulletin fixing an older and a newer branch but not the newest supported one leaves that
    branch's drivers affected: resolve goes to the older branch, at the bulletin's fix, and says
    why the newer one is not proposed."""
    newest = resolve_stack(matrix, gpus=["H100"], as_of=AS_OF)
    older = max(b.branch for b in matrix.driver_branches if b.branch < newest.driver_branch
                and b.type in ("LTSB", "PB") and eol_passed(b, AS_OF) is False)
    later = newest.driver_branch + 100
    template = next(a for a in ADVS.rows if a.component == "driver")
    older_fix = f"{older}.999.99"
    skips_newest: Advisory = dataclasses.replace(
        template, id="9999", date="2026-11-01",
        fixed={str(older): older_fix, str(later): f"{later}.1.1"},
    )
    advs = dataclasses.replace(ADVS, rows=(*ADVS.rows, skips_newest))
    res = resolve_stack(matrix, gpus=["H100"], as_of=AS_OF, advisories=advs)
    assert (res.driver_branch, res.driver_min_version) == (older, older_fix)
    assert driver_hits(advs, res.driver_min_version) == ([], [])
    assert any(
        f"driver R{newest.driver_branch} not proposed" in line and "9999" in line
        for line in res.explain
    )
    # a bulletin fixing only a branch newer than all: no set, and the reason names it
    only_newer = dataclasses.replace(
        template, id="9998", date="2026-11-02", fixed={str(later): f"{later}.1.1"}
    )
    with pytest.raises(NoCompatibleSet, match="9998"):
        resolve_stack(
            matrix,
            gpus=["H100"],
            as_of=AS_OF,
            advisories=dataclasses.replace(ADVS, rows=(*ADVS.rows, only_newer)),
        )


def test_resolved_sets_check_without_a_compatibility_or_security_error(matrix: Matrix) -> None:
    for gpus, fws in [(["H100"], ["torch==2.14.0"]), (["V100"], []), (["L4"], ["torch"])]:
        res = resolve_stack(matrix, gpus=gpus, frameworks=fws, as_of=AS_OF)
        pins = [f"{k}=={v}" for k, v in res.frameworks.items()]
        findings = check_stack(
            matrix, gpus=gpus, driver=res.driver_min_version, cuda=res.cuda, frameworks=pins,
            as_of=AS_OF,
        )
        assert verdict(findings) != "error", (gpus, findings)
        assert exposure(ADVS, driver=res.driver_min_version).findings == ()


def test_cudnn_is_the_one_the_torch_wheel_pins(matrix: Matrix) -> None:
    """H100 + torch 2.14.0: the wheel pins nvidia-cudnn-cu13 9.24.0.43 (data/wheels.yaml), so
    cuDNN 9.24.0 is proposed, not the matrix's newest (9.17.0 in this data)."""
    version = V("2.14.0")
    wheel = wheel_release(matrix, "torch", version)
    assert wheel is not None
    default = default_torch_variant(find_torch(matrix, version), wheel)
    assert default is not None and default.cudnn
    pinned = ".".join(str(x) for x in V(default.cudnn).release[:3])
    res = resolve_stack(matrix, gpus=["H100"], frameworks=["torch==2.14.0"], as_of=AS_OF)
    assert res.cudnn == pinned
    assert any(f"cuDNN {pinned}: the one the torch 2.14.0" in line for line in res.explain)
    without = resolve_stack(matrix, gpus=["H100"], as_of=AS_OF)
    assert without.cudnn != pinned or matrix.cudnn[-1].version == pinned
