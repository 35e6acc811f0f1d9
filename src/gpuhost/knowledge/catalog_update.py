"""``gpuhost data update``'s GPU catalog: regenerated from a newer PCI ID database.

Where the ``pci.ids`` comes from (``--pci-ids``): this machine's own (``/usr/share/misc/pci.ids``
of Debian's ``pci.ids`` package, ``/usr/share/hwdata/pci.ids`` of hwdata: the file ``lspci``
reads), a file, or a URL read through the update's index (the published database is
``https://pci-ids.ucw.cz/v2.2/pci.ids``). Only a database newer than the one the catalog in use
was made from replaces it; a damaged one, or none, keeps the catalog in use, with one line.
"""

from __future__ import annotations

from pathlib import Path

from gpuhost.datadir import data_path, shipped_path
from gpuhost.errors import DataUpdateError, ParseError
from gpuhost.gpus.catalog import CATALOG_FILE, load_catalog
from gpuhost.gpus.pciids import parse_nvidia
from gpuhost.knowledge.gpu_catalog import HOST_PCI_IDS, TABLES_FILE, generate
from gpuhost.knowledge.pypi import Index

PUBLISHED_PCI_IDS = "https://pci-ids.ucw.cz/v2.2/pci.ids"


def _read(source: str, index: Index) -> tuple[str | None, str]:
    """The database's text and where it came from (None: there is none to read)."""
    if source.startswith(("http://", "https://")):
        return index.text(source), source
    for path in [source] if source else list(HOST_PCI_IDS):
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace"), path
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise DataUpdateError(
                f"{path}: cannot read the PCI ID database ({exc.strerror})"
            ) from exc
    return None, source or " or ".join(HOST_PCI_IDS)


def refresh(source: str, index: Index, matrix_text: str) -> tuple[str | None, str]:
    """The new catalog's text (None: the catalog in use stays) and the line saying what was done.

    ``matrix_text``: the matrix the update writes (its GPU rows and architectures)."""
    in_use = load_catalog().version
    kept = f"the GPU catalog of PCI IDs {in_use} ({data_path(CATALOG_FILE)}) is kept"
    text, origin = _read(source, index)
    if text is None:
        return None, f"GPU catalog: no PCI ID database at {origin}; {kept}"
    try:
        version = parse_nvidia(text, origin).version
    except ParseError as exc:
        return None, f"GPU catalog: {exc}; {kept}"
    if version is None or version <= in_use:
        return None, f"GPU catalog: {origin} is version {version}, not newer; {kept}"
    tables = Path(shipped_path(TABLES_FILE)).read_text(encoding="utf-8")
    new = generate(text, origin, tables, matrix_text)
    return new, f"GPU catalog: regenerated from PCI IDs {version} ({origin})"
