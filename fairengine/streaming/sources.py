"""Where a streamed audit's rows come from: Parquet or CSV files, read in record batches.

A source is a Parquet file, a directory (hive-partitioned ``key=value`` folders included), a
glob or a list of paths, or a CSV glob, on local disk or in an object store
(``s3://bucket/prefix/*.parquet`` with ``storage_options``, through fsspec: :mod:`.locations`);
it is opened as a :mod:`pyarrow.dataset` and read one file (fragment) at a time, in record
batches of at most ``batch_rows`` rows, with the columns projected to the ones the audit reads.
Before a file is read its schema is checked against the expected one (the first file's type of
every column read): a missing column or a different type is a
:class:`~fairengine.errors.DataContractError` that names the file, never a trace from deep
inside the reader. Files are read in sorted path order, so a streamed audit (and its
sample) is reproducible.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from fairengine.errors import DataContractError
from fairengine.streaming.locations import expand, file_versions, url

#: Rows per record batch unless the caller says otherwise.
DEFAULT_BATCH_ROWS = 1 << 20

SourceFormat = str  # "parquet" | "csv"


@dataclass(frozen=True)
class Batch:
    """One record batch of one file: ``where`` names it in messages (``part-00017.parquet,
    batch 3``)."""

    file: str
    index: int
    data: pa.RecordBatch
    start: int = 0
    """Row offset of the batch's first row in its file (the sample's row keys)."""

    @property
    def where(self) -> str:
        return f"{self.file}, batch {self.index}"


def _format_of(paths: list[str], fmt: str | None, fs: Any = None) -> str:
    if fmt is not None:
        if fmt not in ("parquet", "csv"):
            raise DataContractError(f"format must be 'parquet' or 'csv', got {fmt!r}")
        return fmt
    first = paths[0]
    if fs is None and os.path.isdir(first):
        return "csv" if any(Path(first).rglob("*.csv")) else "parquet"
    if fs is not None and fs.isdir(first):
        csv = any(str(p).endswith((".csv", ".csv.gz")) for p in fs.find(first))
        return "csv" if csv else "parquet"
    return "csv" if first.endswith((".csv", ".csv.gz")) else "parquet"


class StreamSource:
    """A tabular source read in record batches (module docstring).

    Parameters
    ----------
    path : a file, a folder (hive partitions are found from ``key=value`` folder names), a glob
        (``data/*.parquet``, ``logs/**/*.csv``) or a list of files.
    format : ``"parquet"`` or ``"csv"``; inferred from the names when None.
    batch_rows : the most rows of one record batch (memory is bounded by it).
    dictionary_columns : Parquet text columns to read dictionary-encoded (the protected
        attributes: their values are then decoded once per data page, not once per row).
    storage_options : for an object-store URL (``s3://bucket/prefix/*.parquet``), the options
        of its fsspec filesystem (:mod:`.locations`); never shown in messages.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        format: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        dictionary_columns: Sequence[str] = (),
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise DataContractError(f"batch_rows must be a positive integer, got {batch_rows!r}")
        self.filesystem, self.protocol, self.paths = expand(path, storage_options)
        fs = self.filesystem
        self.format = _format_of(self.paths, format, fs)
        self.batch_rows = batch_rows
        isdir = os.path.isdir if fs is None else fs.isdir
        hive = any("=" in part for p in self.paths for part in Path(p).parts) or any(
            isdir(p) for p in self.paths
        )
        file_format: str | ds.FileFormat = self.format
        if self.format == "parquet" and dictionary_columns:
            file_format = ds.ParquetFileFormat(
                read_options=ds.ParquetReadOptions(dictionary_columns=set(dictionary_columns))
            )
        try:
            self.dataset = ds.dataset(
                self.paths if len(self.paths) > 1 else self.paths[0],
                format=file_format,
                partitioning="hive" if hive else None,
                filesystem=fs,
            )
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataContractError(f"cannot open the data source {self.urls[:3]}: {exc}") from None
        self.fragments = sorted(self.dataset.get_fragments(), key=lambda f: f.path)
        if not self.fragments:
            raise DataContractError(f"the data source {self.urls[:3]} holds no files")
        self._root = os.path.commonpath([os.path.dirname(f.path) for f in self.fragments])
        self.partition_columns = tuple(
            name for name in self.dataset.schema.names if name not in self._file_columns(0)
        )

    @property
    def urls(self) -> list[str]:
        """The source's paths as given (with the protocol of an object store)."""
        return [url(self.protocol, p) for p in self.paths]

    @property
    def base(self) -> str:
        """The folder above the files' first ``key=value`` (hive partition) folder: where a
        reader that discovers partitions from the paths (Spark's ``basePath``) starts."""
        parts = Path(self._root).parts
        for i, part in enumerate(parts):
            if "=" in part:
                return str(Path(*parts[:i])) if i else ""
        return self._root

    def versions(self) -> list[tuple[str, int | None, str]]:
        """``(path, size, version)`` of every file, in read order (the cache key of a
        streamed source: :func:`fairengine.streaming.locations.file_versions`)."""
        return file_versions(self.filesystem, [f.path for f in self.fragments])

    @property
    def root(self) -> str:
        """The files' common folder (names in messages are relative to it)."""
        return self._root

    def _file_columns(self, i: int) -> list[str]:
        return list(self.fragments[i].physical_schema.names)

    def name(self, fragment: ds.Fragment) -> str:
        """The file's path relative to the source's common folder (what messages show)."""
        return os.path.relpath(fragment.path, self._root) if self._root else fragment.path

    @property
    def files(self) -> list[str]:
        return [self.name(f) for f in self.fragments]

    def expected_types(self, columns: Sequence[str]) -> dict[str, pa.DataType]:
        """The type of each column read: the first file's (or the partitioning's)."""
        schema = self.dataset.schema
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise DataContractError(
                f"{self.name(self.fragments[0])}: missing column(s) {missing}; the file has "
                f"columns {list(schema.names)}"
            )
        first = self.fragments[0].physical_schema
        return {
            c: (first.field(c).type if c in first.names else schema.field(c).type) for c in columns
        }

    def batches(self, columns: Sequence[str]) -> Iterator[Batch]:
        """Record batches of ``columns`` (in that order), file by file, each file's schema
        checked first (:meth:`check_file`)."""
        cols = list(dict.fromkeys(columns))
        expected = self.expected_types(cols)
        for fragment in self.fragments:
            yield from self.file_batches(fragment, cols, expected)

    def file_batches(
        self, fragment: ds.Fragment, columns: list[str], expected: dict[str, pa.DataType]
    ) -> Iterator[Batch]:
        """One file's record batches of ``columns``, its schema checked against ``expected``
        first (what a cluster engine's task per file reads)."""
        name = self.name(fragment)
        self.check_file(fragment, expected)
        scanner = fragment.to_batches(
            columns=columns, batch_size=self.batch_rows, schema=self.dataset.schema
        )
        index = start = 0
        while True:
            try:
                batch = next(scanner)
            except StopIteration:
                break
            except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
                raise DataContractError(f"{name}, batch {index}: cannot be read ({exc})") from None
            if batch.num_rows:
                yield Batch(name, index, batch, start)
            start += batch.num_rows
            index += 1

    def check_file(self, fragment: ds.Fragment, expected: dict[str, pa.DataType]) -> None:
        """A missing column or a type other than ``expected`` is an error naming the file."""
        name = self.name(fragment)
        try:
            schema = fragment.physical_schema
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataContractError(f"{name}: cannot read the file's schema ({exc})") from None
        missing = [c for c in expected if c not in schema.names and c not in self.partition_columns]
        if missing:
            raise DataContractError(
                f"{name}: missing column(s) {missing}; the file has columns {list(schema.names)}"
            )
        for col, typ in expected.items():
            if col in schema.names and _value_type(schema.field(col).type) != _value_type(typ):
                raise DataContractError(
                    f"{name}: column {col!r} has type {schema.field(col).type}, the other "
                    f"files have {typ}"
                )


def _value_type(typ: pa.DataType) -> pa.DataType:
    """The type of the values (a dictionary-encoded column's value type)."""
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def cluster_frame_engine(source: Any) -> str | None:
    """``dask`` for a ``dask.dataframe.DataFrame``, ``spark`` for a Spark DataFrame, else None
    (checked by class name and module, without importing Dask or Spark)."""
    for cls in type(source).__mro__:
        module = cls.__module__ or ""
        if cls.__name__ == "DataFrame" and module.startswith("dask"):
            return "dask"
        if cls.__name__ == "DataFrame" and module.startswith("pyspark"):
            return "spark"
    return None
