"""Driver branch end of life, R470 included (its end rests on NVIDIA's bulletins: no R470 fix
after 2024-06), and the newest LTSB from NVIDIA's 620 support page."""

from __future__ import annotations

import datetime as dt

from gpuhost.matrix import Matrix, check_stack
from gpuhost.matrix.advisories import driver_hits, load_advisories
from gpuhost.matrix.lookup import eol_passed


def test_r470_is_end_of_life_and_unpatched_since_2024(matrix: Matrix) -> None:
    r470 = matrix.branch(470)
    assert r470 is not None and eol_passed(r470, dt.date(2026, 11, 22)) is True
    rules = {f.rule for f in check_stack(matrix, driver="470.256.02", gpus=["K80"])}
    assert "driver.branch-eol" in rules
    hits, unpatched = driver_hits(load_advisories(), "470.256.02")
    assert not hits and min(a.date for a in unpatched) > "2024-06-06"


def test_every_branch_seen_in_fleets_has_an_end_of_life_answer(matrix: Matrix) -> None:
    for number in (450, 470, 510, 515, 525, 535, 550, 570, 580, 595, 620):
        branch = matrix.branch(number)
        assert branch is not None and branch.eol is not None, number
    r620 = matrix.branch(620)
    assert r620 is not None and (r620.type, r620.eol) == ("LTSB", "2029-09")
