"""What `matrix check` answers, as {rule: (severity, message)}, on a fixed date (the tests that
try releases and GPUs as a user would)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gpuhost.matrix import Matrix, check_stack

AS_OF = dt.date(2026, 11, 23)


def rules(matrix: Matrix, **kw: Any) -> dict[str, tuple[str, str]]:
    found = check_stack(matrix, as_of=AS_OF, **kw)
    return {f.rule: (f.severity, f.message) for f in found}
