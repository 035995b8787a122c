"""Reading an ``audit.json``: the audit result with every method's details as its typed class.

:meth:`fairengine.results.AuditResult.from_json` reads the details of the methods whose types
are registered in the process; :func:`read_audit` first imports :mod:`fairengine.registry`,
which registers every built-in method's details type, so a file read by a process that ran no
audit (a report re-rendered, ``fairengine log``) gets typed details, never raw JSON. It sits
above both modules: the result model does not import the registry (which imports the methods,
which import the result model).
"""

from __future__ import annotations

from pathlib import Path

import fairengine.registry  # noqa: F401  (registers the built-in methods' details types)
from fairengine.results import AuditResult


def read_audit(text: str) -> AuditResult:
    """The audit result of an ``audit.json``'s text (see :meth:`AuditResult.from_dict`)."""
    return AuditResult.from_json(text)


def load_audit(path: str | Path) -> AuditResult:
    """The audit result stored in the file ``path``."""
    return read_audit(Path(path).read_text(encoding="utf-8"))
