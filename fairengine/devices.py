"""Torch devices of the methods' ``device`` settings: ``auto`` resolved to a concrete device.

Every torch path (FlipTest's transport maps, the individual-fairness attack, the permutation
tests' torch backend) takes a ``device`` setting with the same values:

* ``auto`` (the default): ``cuda`` when torch sees a CUDA GPU, else ``cpu``;
* ``cpu``;
* ``cuda`` or ``cuda:<n>``: that GPU; an error when torch sees no CUDA device (or no GPU ``n``).

:func:`check_device` validates a setting without importing torch (configuration time);
:func:`resolve_device` turns it into the concrete device string the method runs on, which the
method records in its ``parameters`` beside the requested one.
"""

from __future__ import annotations

import re

from fairengine.errors import ConfigError

__all__ = ["AUTO", "DEVICE_VALUES", "check_device", "cuda_available", "resolve_device"]

AUTO = "auto"
#: The accepted values, as error messages name them.
DEVICE_VALUES = ("auto", "cpu", "cuda", "cuda:<n>")
_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")


def check_device(value: object, where: str) -> None:
    """Raise :class:`ConfigError` ``"<where> must be 'auto', 'cpu', 'cuda' or 'cuda:<n>', got
    ..."`` unless ``value`` is one of those strings. Does not import torch."""
    if not isinstance(value, str) or _PATTERN.fullmatch(value) is None:
        raise ConfigError(
            f"{where} must be 'auto' (CUDA when available, else CPU), 'cpu', 'cuda' or "
            f"'cuda:<n>', got {value!r}"
        )


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available())


def resolve_device(requested: str | None, where: str = "device") -> str:
    """The concrete torch device (``"cpu"``, ``"cuda"`` or ``"cuda:<n>"``) for ``requested``.

    ``"auto"`` and ``None`` give ``"cuda"`` when :func:`cuda_available`, else ``"cpu"``.
    ``"cuda"``/``"cuda:<n>"`` are returned as given when torch sees that GPU; otherwise
    :class:`ConfigError` names ``where`` (e.g. ``methods.fliptest.device``) and the way out.
    """
    value = AUTO if requested is None else requested
    check_device(value, where)
    if value == AUTO:
        return "cuda" if cuda_available() else "cpu"
    if value == "cpu":
        return "cpu"
    if not cuda_available():
        raise ConfigError(
            f"{where} is {value!r} but torch sees no CUDA device; use 'auto' (CUDA when "
            "available, else CPU) or 'cpu'"
        )
    index = int(value.partition(":")[2] or 0)
    import torch

    count = int(torch.cuda.device_count())
    if index >= count:
        raise ConfigError(
            f"{where} is {value!r} but torch sees {count} CUDA device(s) (cuda:0 to "
            f"cuda:{count - 1}); use 'auto' or 'cuda'"
        )
    return value
