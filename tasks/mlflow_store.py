"""Is the MLflow tracking store usable? A quick check before an audit starts and before logging.

A remote server (``http(s)://``) is asked for ``/health`` with a short timeout; a SQLite or file
store is usable when its folder exists (or can be created) and is writable. Other schemes
(``databricks``, plugins) cannot be checked cheaply and count as reachable.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

HEALTH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class StoreCheck:
    """Outcome of :func:`check_tracking_store`: ``reachable`` and, when not, ``reason``."""

    uri: str
    reachable: bool
    reason: str = ""


def _local_folder(uri: str) -> Path | None:
    """The folder a ``sqlite:///...`` or ``file:...``/plain-path store writes to."""
    if uri.startswith("sqlite:"):
        path = uri.split("sqlite:///", 1)[1] if "sqlite:///" in uri else ""
        if not path or path.startswith(":memory:"):
            return None
        return Path(path).parent  # sqlite:////abs/db -> /abs, sqlite:///rel/db -> rel
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(uri)
    return None


def check_tracking_store(uri: str, timeout: float = HEALTH_TIMEOUT_S) -> StoreCheck:
    """Whether the tracking store at ``uri`` answers (remote) or can be written (local)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                if response.status == 200:
                    return StoreCheck(uri, True)
                return StoreCheck(uri, False, f"GET {url} answered HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            return StoreCheck(uri, False, f"GET {url} answered HTTP {exc.code}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return StoreCheck(uri, False, f"no answer from {url} within {timeout:g} s: {reason}")
    folder = _local_folder(uri)
    if folder is None:
        return StoreCheck(uri, True)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        return StoreCheck(uri, False, f"the store's folder {str(folder)!r} is not writable")
    return StoreCheck(uri, True)
