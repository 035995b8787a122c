"""Formatting of numbers, intervals, levels, times and ids for the report's view data.

Every value the report prints goes through one of these functions, so ``None``, NaN and the
infinities read the same everywhere (``—``, ``NaN``, ``∞``). Shared by :mod:`tasks.report` and
:mod:`tasks.report.views.mitigation`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tasks.report.plots import as_float

DASH = "—"

_SLUG = re.compile(r"[^a-z0-9]+")


# --------------------------------------------------------------------------- number formatting


def _nonfinite(x: float) -> str | None:
    """Readable text of a non-finite float, ``None`` for a finite one."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return None


def _special(value: Any) -> tuple[float, str | None]:
    """``value`` as a float, and the text to print instead when it is ``None`` (``—``) or not
    finite (``NaN``, ``∞``, ``-∞``); ``None`` text for a finite number."""
    if value is None:
        return math.nan, DASH
    x = as_float(value)
    return x, _nonfinite(x)


def fmt_number(value: Any) -> str:
    """An estimate or interval end: 4 decimals (``0.0512``, ``-0.0030``, ``1.2500``).

    Magnitudes below 1e-4 (but not 0) or from 1e5 up use 4 significant digits in scientific
    notation (``3.210e-05``); ``None`` is ``—``, NaN is ``NaN``, infinities are ``∞``/``-∞``.
    """
    x, special = _special(value)
    if special is not None:
        return special
    if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e5):
        return f"{x:.3e}"
    return f"{x:.4f}"


def fmt_rate(value: Any) -> str:
    """A rate in [0, 1] with 4 decimals (``0.3100``); NaN/∞/``None`` as in :func:`fmt_number`."""
    x, special = _special(value)
    return special if special is not None else f"{x:.4f}"


def fmt_pvalue(value: Any) -> str:
    """A p-value: ``<0.0001`` when tiny, else 4 decimals; ``—`` for ``None``, ``NaN`` for NaN."""
    p, special = _special(value)
    if special is not None:
        return special
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def fmt_interval(low: Any, high: Any, fmt: Callable[[Any], str] = fmt_number) -> str:
    """``[low, high]`` with both ends formatted by ``fmt``."""
    return f"[{fmt(low)}, {fmt(high)}]"


def fmt_level(level: Any) -> str:
    """A confidence level as a percentage: ``0.95`` -> ``95%``, ``0.975`` -> ``97.5%``."""
    x, special = _special(level)
    return special if special is not None else f"{round(x * 100, 6):g}%"


def fmt_count(value: Any) -> str:
    """An integer count with thousands separators (``12,345``); ``—`` for ``None``."""
    x, special = _special(value)
    if special is not None:
        return special
    return f"{round(x):,}" if x == round(x) else f"{x:,.2f}"


def fmt_seconds(value: Any) -> str:
    """A duration: ``0.123 s``, ``12.3 s``; ``—`` for ``None``."""
    x, special = _special(value)
    if special is not None:
        return special
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def fmt_value(value: Any) -> str:
    """A parameter or config value: ``—`` for ``None``, ``yes``/``no``, lists comma-joined,
    floats compact (``0.05``), dicts as compact JSON."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) or value in ("NaN", "Infinity", "-Infinity"):
        x = as_float(value)
        special = _nonfinite(x)
        return special if special is not None else f"{x:g}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt_value(v) for v in value) if value else DASH
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def fmt_datetime(value: Any) -> str:
    """An ISO timestamp as ``2026-11-22 10:54:03 UTC``; anything unparsable as given."""
    if not value:
        return DASH
    try:
        dt = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    text = dt.strftime("%Y-%m-%d %H:%M:%S")
    offset = dt.utcoffset()
    if offset is not None:
        text += " UTC" if offset.total_seconds() == 0 else dt.strftime(" UTC%z")
    return text


def short_json(value: Any, limit: int = 160) -> str:
    """Compact JSON of ``value`` (strings as themselves), cut to ``limit`` characters."""
    if value is None:
        return DASH
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slug(*parts: Any) -> str:
    """An HTML id made of ``[a-z0-9-]`` only, from any text (user names included)."""
    text = "-".join(_SLUG.sub("-", str(p).lower()).strip("-") for p in parts)
    return text.strip("-") or "x"


def with_interval(r: dict[str, Any], fmt: Callable[[Any], str] = fmt_rate) -> str:
    """``estimate [low, high]`` of a ``{"estimate", "low", "high"}`` dict."""
    return f"{fmt(r.get('estimate'))} {fmt_interval(r.get('low'), r.get('high'), fmt)}"
