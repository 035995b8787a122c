"""Checks shared by the method configurations (``methods.<method>.*`` in the audit YAML)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from fairengine.errors import ConfigError


def require_integer(where: str, key: str, value: Any, low: int) -> None:
    """Raise :class:`ConfigError` ``"<where>.<key> must be an integer >= <low>, got <value>"``
    unless ``value`` is an int (not a bool) of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where}.{key} must be an integer >= {low}, got {value!r}")


def require_integers(where: str, config: Any, limits: Iterable[tuple[str, int]]) -> None:
    """:func:`require_integer` for each ``(attribute, lower bound)`` of ``config``."""
    for key, low in limits:
        require_integer(where, key, getattr(config, key), low)


ALTERNATIVES = ("two-sided", "greater", "less")
"""The alternatives of a method's tests (``methods.<method>.alternative``)."""


def require_alternative(where: str, value: Any) -> None:
    """Raise unless ``value`` is one of :data:`ALTERNATIVES`."""
    if value not in ALTERNATIVES:
        raise ConfigError(
            f"{where}.alternative must be 'two-sided', 'greater' or 'less', got {value!r}"
        )


def require_level(where: str, key: str, value: Any) -> None:
    """Raise unless ``value`` is a number strictly between 0 and 1 (a confidence level)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigError(f"{where}.{key} must lie in (0, 1), got {value!r}")


def config_parameters(config: Any) -> dict[str, Any]:
    """A method configuration's settings as the method result's ``parameters`` (every field of
    the dataclass but ``enabled``, lists copied)."""
    out = dataclasses.asdict(config)
    out.pop("enabled", None)
    return out
