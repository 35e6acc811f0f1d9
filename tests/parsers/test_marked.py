"""The one splitter for line-marked multi-section output (gpuhost.parsers.marked)."""

from __future__ import annotations

from gpuhost.parsers.marked import (
    MISSING,
    MarkedSection,
    cat_section,
    section_text,
    split_marked,
    split_sections,
)


def test_split_marked_names_args_and_bodies() -> None:
    lines = [
        "login banner",
        "##GPUHOST packages",
        "nvidia-smi\t535.261.03-1",
        "##GPUHOST file 644 /etc/apt/preferences.d/gpuhost nvidia",
        "UGFja2FnZQ==",
        "##GPUHOST end",
    ]
    assert split_marked(lines, "##GPUHOST ", maxsplit=2) == [
        MarkedSection("packages", [], ["nvidia-smi\t535.261.03-1"]),
        MarkedSection("file", ["644", "/etc/apt/preferences.d/gpuhost nvidia"], ["UGFja2FnZQ=="]),
        MarkedSection("end", [], []),
    ]


def test_split_sections_and_missing_files() -> None:
    lines = ["##GPUHOST section main", "Include x", MISSING, "##GPUHOST section dropin", MISSING]
    lines += ["##GPUHOST section main", "Port 22"]
    sections = split_sections(lines)
    assert sections == {"main": ["Include x", MISSING, "Port 22"], "dropin": [MISSING]}
    assert section_text(sections, "main") == f"Include x\n{MISSING}\nPort 22"
    assert section_text(sections, "dropin") is None
    assert section_text(sections, "absent") is None
    assert cat_section("conf", "/etc/x") == (
        "echo '##GPUHOST section conf'; cat /etc/x 2>/dev/null || echo '##GPUHOST missing'"
    )
