"""The fault catalog as the Markdown table docs/monitoring.md shows, generated from the data.

``tests/docs`` checks that the document's table is ``catalog_markdown()``; after editing
``data/faults.yaml`` regenerate it with
``python -c "from gpuhost.faults.table import update_doc; update_doc('docs/monitoring.md')"``.
"""

from __future__ import annotations

from pathlib import Path

from gpuhost.faults.catalog import Catalog, FaultRow, load_catalog

BEGIN = "<!-- fault catalog: generated from src/gpuhost/data/faults.yaml (gpuhost.faults.table) -->"
END = "<!-- end of the generated fault catalog -->"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _row(row: FaultRow) -> str:
    nvidia = f"`{row.nvidia_action}`" if row.nvidia_action else ""
    title = row.title + (f" ({row.note})" if row.note else "")
    return (
        f"| `{row.id}` | {_cell(title)} | {row.severity} | `{row.action}` | {row.drain} "
        f"| {nvidia} | {row.source} |"
    )


def catalog_markdown(catalog: Catalog | None = None) -> str:
    """The catalog's rows, its Xid default, the recovery actions and the sources, as Markdown."""
    catalog = catalog or load_catalog()
    unknown = catalog.unknown_xid
    lines = [
        "| id | fault | severity | action | drain | NVIDIA's immediate action | source |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(_row(row) for row in catalog.rows.values()),
        f"| `gpu.xid.N` (any other code) | {_cell(unknown.title)} | {unknown.severity} "
        f"| `{unknown.action}` | {unknown.drain} |  | {unknown.source} |",
        "",
        "Recovery actions the driver reports (Xid 154, nvidia-smi's GPU Recovery Action), "
        "preferred to the catalog's action for that GPU's faults:",
        "",
        "| NVML code | words | action | drain |",
        "| --- | --- | --- | --- |",
        *(
            f"| {entry.code} | {', '.join(entry.words)} | `{entry.action}` | {entry.drain} |"
            for entry in catalog.recovery_actions
        ),
        "",
        "NVIDIA's resolution buckets read as: "
        + ", ".join(f"`{k}` → `{v}`" for k, v in catalog.nvidia_actions.items())
        + ".",
        "",
        "Sources:",
        "",
        *(f"- `{name}`: {_cell(text)}" for name, text in catalog.sources.items()),
    ]
    return "\n".join(lines)


def with_table(doc: str, table: str | None = None) -> str:
    """``doc`` with the text between the catalog markers replaced by the generated table;
    ValueError when the markers are missing."""
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {BEGIN!r} ... {END!r} block")
    body = table if table is not None else catalog_markdown()
    return doc[: start + len(BEGIN)] + "\n" + body + "\n" + doc[end:]


def update_doc(path: str) -> None:
    """Rewrite the catalog table of the Markdown file ``path``."""
    file = Path(path)
    file.write_text(with_table(file.read_text(encoding="utf-8")), encoding="utf-8")
