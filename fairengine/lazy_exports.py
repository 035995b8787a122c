"""Lazy package exports (PEP 562), so that importing a light submodule stays light.

``import fairengine.fliptest.config`` first runs ``fairengine/fliptest/__init__.py``. When that
file imported every submodule, reading an audit config pulled in torch, scikit-learn and POT
(2 s of the CLI's fail-fast path). Packages list their public names instead, and each name is
imported on first access, as scipy does for its subpackages::

    __getattr__, __dir__ = lazy_exports(__name__, {"run_fliptest": "method", ...})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a public name to
    the submodule (relative to ``package``) that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
