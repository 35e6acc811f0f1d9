"""``gpuhost.operations._facts.fact``: one read per host and arguments while preparing, a fresh
read for every evaluation at the execute stage (operations must see earlier changes)."""

from __future__ import annotations

from pathlib import Path

from pyinfra.api import FactBase, operation

from gpuhost.deploy_runner import run_deploy
from gpuhost.operations._facts import fact


class _CountedRead(FactBase):
    """Appends a line to ``log`` on the host each time it is read."""

    def command(self, log: str) -> str:
        return f"echo read >> {log}; echo ok"

    def process(self, output: list[str]) -> str:
        return output[0]


@operation()
def _reads(log: str, change: bool):
    from pyinfra import host

    assert fact(_CountedRead, log=log) == "ok"
    if change:
        yield "true"
    else:
        host.noop("nothing")


def _run(tmp_path: Path, change: bool) -> int:
    log = tmp_path / "reads"
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = ["@local"]\n')

    def deploy() -> None:
        _reads(name="one", log=str(log), change=False)
        _reads(name="two", log=str(log), change=change)
        _reads(name="three", log=str(log), change=False)

    [outcome] = run_deploy(str(inventory), deploy)
    assert outcome.status == "ok"
    return len(log.read_text().splitlines())


def test_a_fact_is_read_once_while_preparing(tmp_path) -> None:
    assert _run(tmp_path, change=False) == 1  # three operations, one read, no execute stage


def test_every_execute_evaluation_reads_the_fact_again(tmp_path) -> None:
    assert _run(tmp_path, change=True) == 1 + 3  # prepare once, then once per operation
