"""Where a streamed source's files live: local paths, or object-store URLs read through fsspec.

A URL (``s3://bucket/prefix/*.parquet``, ``gs://…``, ``abfs://…``, ``https://…``) is opened with
the fsspec filesystem of its protocol, built from ``storage_options`` (passed to the
filesystem's constructor as they are: ``key``/``secret``/``endpoint_url`` for ``s3fs``,
``token`` for ``gcsfs``, …; leave them out to use the environment's credentials). Paths on it
are then the protocol-less ones fsspec and pyarrow use (``bucket/prefix/part-0.parquet``) and
:func:`url` puts the protocol back for messages. A protocol whose fsspec package is not
installed is an error naming the package to install.

Each file's **version** (:func:`file_versions`) is what a cache key needs to notice a changed
file without reading it: size and modification time (nanoseconds) of a local file; size and
the store's own version of an object (``VersionId``, ``ETag``, ``generation``, ``md5``, else its
modification time).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from fairengine.errors import DataContractError
from fairengine.urls import protocol_of

#: Object-store metadata fields that change when an object's content does, first found wins.
VERSION_FIELDS = (
    "VersionId",
    "version_id",
    "ETag",
    "etag",
    "generation",
    "md5Hash",
    "md5",
    "content_md5",
    "LastModified",
    "last_modified",
    "mtime",
    "updated",
    "created",
)


def local_path(path: str | os.PathLike[str]) -> str:
    """A local path with a ``file://`` prefix removed."""
    text = os.fspath(path)
    return text[len("file://") :] if text.lower().startswith("file://") else text


def package_for(protocol: str) -> str | None:
    """The package that implements fsspec's ``protocol`` (``s3`` -> ``s3fs``), if fsspec knows."""
    from fsspec.registry import known_implementations

    spec = known_implementations.get(protocol)
    if not spec:
        return None
    return str(spec["class"]).split(".", 1)[0]


def open_filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The fsspec filesystem of ``url``'s protocol, built from ``storage_options``.

    Its listing cache is cleared, so that a file changed since the last look in this process is
    seen as it is now.
    """
    import fsspec

    protocol = protocol_of(url)
    assert protocol is not None, url
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError:
        package = package_for(protocol) or f"the fsspec implementation of {protocol}://"
        raise DataContractError(
            f"data.path {url!r}: reading {protocol}:// URLs needs the package {package!r}, "
            f"which is not installed (pip install {package})"
        ) from None
    except ValueError:
        raise DataContractError(
            f"data.path {url!r}: fsspec knows no filesystem for the protocol {protocol!r}"
        ) from None
    try:
        fs = cls(**dict(storage_options or {}))
    except TypeError as exc:
        raise DataContractError(
            f"data.storage_options do not fit the {protocol}:// filesystem "
            f"({cls.__name__}): {_first_line(exc)}"
        ) from None
    fs.invalidate_cache()
    return fs


def strip_protocol(fs: Any, url: str) -> str:
    """``url`` as a path on ``fs`` (``bucket/prefix/file``)."""
    return str(fs._strip_protocol(url))


def url(protocol: str | None, path: str) -> str:
    """A path on a filesystem as its URL (the path itself when local)."""
    return path if protocol is None else f"{protocol}://{path}"


def expand(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Any, str | None, list[str]]:
    """The filesystem (``None``: local), the protocol and the paths of ``path``: a list as
    given, a glob expanded (sorted), a file or folder as is; a missing path, bucket or prefix
    and a glob with no match are errors naming the URL."""
    import glob

    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    if not items:
        raise DataContractError("the data source lists no files")
    texts = [os.fspath(p) for p in items]
    protocols = {protocol_of(t) for t in texts}
    if len(protocols) > 1:
        raise DataContractError(
            f"the data source mixes local paths and URLs or several protocols: {texts[:3]}"
        )
    protocol = protocols.pop()
    if protocol is None:
        if storage_options:
            raise DataContractError(
                "data.storage_options apply to object-store URLs (s3://, gs://, abfs://, ...); "
                f"the data path {texts[0]!r} is local"
            )
        texts = [local_path(t) for t in texts]
        if len(texts) > 1:
            return None, None, texts
        text = texts[0]
        if any(ch in text for ch in "*?["):
            found = sorted(glob.glob(text, recursive=True))
            if not found:
                raise DataContractError(f"no file matches {text!r}")
            return None, None, found
        if not os.path.exists(text):
            raise DataContractError(f"the data path {text!r} does not exist")
        return None, None, [text]
    fs = open_filesystem(texts[0], storage_options)
    paths = [strip_protocol(fs, t) for t in texts]
    if len(paths) > 1:
        return fs, protocol, paths
    text, shown = paths[0], texts[0]
    try:
        if any(ch in text for ch in "*?["):
            found = sorted(p for p in fs.glob(text) if not fs.isdir(p))
            if not found:
                raise DataContractError(f"no file matches {shown!r}")
            return fs, protocol, found
        if not fs.exists(text):
            raise DataContractError(
                f"the data path {shown!r} does not exist (no such bucket, prefix or object)"
            )
    except DataContractError:
        raise
    except (OSError, ValueError) as exc:  # FileNotFoundError, PermissionError, a bad bucket name
        raise DataContractError(
            f"cannot list the data path {shown!r}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    return fs, protocol, [text]


def file_versions(fs: Any, paths: Sequence[str]) -> list[tuple[str, int | None, str]]:
    """``(path, size, version)`` of each file (module docstring), in the order given."""
    out: list[tuple[str, int | None, str]] = []
    for p in paths:
        if fs is None:
            st = os.stat(p)
            out.append((os.path.abspath(p), int(st.st_size), f"mtime_ns={st.st_mtime_ns}"))
            continue
        try:
            info = fs.info(p)
        except (OSError, ValueError) as exc:
            raise DataContractError(
                f"cannot read the metadata of {p!r}: {type(exc).__name__}: {_first_line(exc)}"
            ) from None
        size = info.get("size", info.get("Size"))
        version = next(
            (f"{k}={info[k]}" for k in VERSION_FIELDS if info.get(k) not in (None, "")), ""
        )
        out.append((p, None if size is None else int(size), version))
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
