"""The PyTorch/TensorFlow GPU smoke test.

- ``script.py``: standalone script copied to a host and run with the host's Python; prints one
  JSON document (see its docstring for the schema).
- ``result.py``: validates that document into typed objects (one ParseError when malformed).
- ``judge.py``: turns a result plus :class:`Expectations` into :class:`Verdict` objects.
- ``runner.py``: runs the script with a local Python interpreter.
"""

from gpuhost.smoke.judge import Expectations, PerfReference, Verdict, has_failures, judge
from gpuhost.smoke.result import SmokeResult, parse_result, parse_result_text
from gpuhost.smoke.runner import SCRIPT_PATH, run_local, script_command

__all__ = [
    "SCRIPT_PATH",
    "Expectations",
    "PerfReference",
    "SmokeResult",
    "Verdict",
    "has_failures",
    "judge",
    "parse_result",
    "parse_result_text",
    "run_local",
    "script_command",
]
