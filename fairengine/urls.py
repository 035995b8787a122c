"""Whether a data path is an object-store URL (``s3://bucket/key``, ``gs://…``, ``abfs://…``) or a
local path (``file://`` included): what :mod:`fairengine.config` and
:mod:`fairengine.streaming.locations` both ask, answered once."""

from __future__ import annotations

import os
import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def protocol_of(path: str | os.PathLike[str]) -> str | None:
    """The URL's protocol (``s3``, ``gs``, …); ``None`` for a local path or ``file://``."""
    match = _SCHEME.match(os.fspath(path))
    if match is None:
        return None
    proto = match.group(1).lower()
    return None if proto in ("file", "local") else proto


def is_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an object-store (non-local) URL."""
    return protocol_of(path) is not None
