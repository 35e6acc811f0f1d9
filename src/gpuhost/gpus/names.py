"""The one GPU name matcher: every table keyed by a GPU name (the catalog, the matrix, the peaks,
the node classes, the collective floors, the smoke judge) compares names through these keys.

- :func:`sku_key`: the name as a SKU (one memory size, one form factor): case, spaces, ``-`` and
  ``_`` ignored, the vendor prefix dropped ("NVIDIA A100-SXM4-80GB" = "a100 sxm4 80gb");
- :func:`normalise_name`: the model the name belongs to, memory size, memory type and form factor
  dropped ("NVIDIA A100-SXM4-80GB" -> "A100");
- :func:`mobile_key`: the model without the laptop words and board-variant letters ("RTX A3000
  Laptop GPU", "Quadro P5200 Mobile" and "GeForce GTX 1080 with Max-Q Design" -> the desktop
  model's key): a laptop part is the same architecture as the desktop part of its name, so it
  answers compute capability only.
"""

from __future__ import annotations

import re

_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE"}
# Words that name a memory size, memory type or form factor, not a different chip.
_VARIANT_WORDS = {
    "PCIE",
    "SXM",
    "SXM2",
    "SXM3",
    "SXM4",
    "SXM5",
    "SXM6",
    "NVL",
    "HBM2",
    "HBM2E",
    "HBM3",
    "HBM3E",
    "SFF",
    "GENERATION",
    "EDITION",
    "SERVER",
    "WORKSTATION",
    "MAX",
    "Q",
    "WITH",
    "DESIGN",
}
_MOBILE_WORDS = {"LAPTOP", "MOBILE", "GPU", "MAX-Q", "NOTEBOOK", "EMBEDDED"}
_MEMORY_RE = re.compile(r"^\d+(GB|G|GIB|MB)$")
_COUNT_RE = re.compile(r"^\s*\d+\s*[xX]\s+")
_GLUED_RE = re.compile(r"^(RTX|GTX|GT)(\d{3,4})$")


def normalise_name(name: str) -> str:
    """Reduce a GPU name to its model key: "NVIDIA A100-SXM4-80GB" -> "A100".

    Returns "" when nothing is left (an empty or vendor-only name).
    """
    text = re.sub(r"\([^)]*\)", " ", name)  # "(MIG enabled)", "(PCI 10de:2b85)"
    text = _COUNT_RE.sub("", text)  # "8x NVIDIA H100" as written in inventories
    tokens: list[str] = []
    for raw in re.split(r"[\s\-_/,]+", text.upper()):
        if not raw:
            continue
        glued = _GLUED_RE.match(raw)
        parts = [glued.group(1), glued.group(2)] if glued else [raw]
        for tok in parts:
            if tok in _VENDOR_WORDS and not tokens:
                continue
            if tok in _VARIANT_WORDS or _MEMORY_RE.match(tok):
                continue
            tokens.append(tok)
    return " ".join(tokens)


def mobile_key(name: str) -> str:
    """The model key without the laptop words (see the module docstring) and without a board
    variant's lower-case letters after the model number (the PCI database's "Tesla K40c",
    "K20m": NVIDIA's tables list the "Tesla K40")."""
    text = re.sub(r"(?i)\bmax-q\b", " ", name)
    text = re.sub(r"(?<=\d)[a-z]{1,2}\b", "", text)
    tokens = [t for t in normalise_name(text).split() if t not in _MOBILE_WORDS]
    return " ".join(tokens)


def sku_key(name: str) -> str:
    """The exact SKU key: case, spaces, '-' and '_' ignored, a leading "NVIDIA" dropped."""
    words = re.split(r"[\s_-]+", name.strip().lower())
    if words and words[0] == "nvidia":
        words = words[1:]
    return " ".join(w for w in words if w)


def same_sku(a: str, b: str) -> bool:
    return bool(sku_key(a)) and sku_key(a) == sku_key(b)
