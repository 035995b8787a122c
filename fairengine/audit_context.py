"""What an audit was about and how it ran: the typed ``dataset``, ``model`` and ``metadata`` of
:class:`fairengine.results.AuditResult`.

Each is a frozen dataclass whose JSON is the object ``audit.json`` has always held under that
key (same keys, same values): :meth:`to_dict` writes the keys a fresh audit writes, and
:meth:`from_dict` reads any earlier file. A key this version does not know, or a known key whose
value does not have the declared type (an older writer), is kept verbatim in ``extra`` and
written back, so reading and writing a file never drops anything.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from fairengine.result_codec import JSONObject, JSONValue, ResultFormatError, decode, encode

_T = TypeVar("_T", bound="_Record")


@dataclass(frozen=True)
class _Record:
    """A JSON object with typed fields and ``extra`` for the keys no field reads."""

    extra: JSONObject = field(default_factory=dict, kw_only=True)
    read_keys: frozenset[str] | None = field(default=None, compare=False, repr=False, kw_only=True)
    """The keys of the JSON object this record was read from (``None``: built in memory); a
    field that is ``None`` is written back exactly when that object had its key."""
    _custom_json: ClassVar[bool] = True  # fairengine.result_codec uses to_dict/from_dict
    _always: ClassVar[frozenset[str]] = frozenset()
    """Fields written even when ``None`` (the keys every fresh audit writes); the others are
    left out when ``None``."""

    def _written(self, name: str, value: object) -> bool:
        if value is not None:
            return True
        if self.read_keys is not None:
            return name in self.read_keys
        return name in self._always

    def to_dict(self) -> JSONObject:
        out: JSONObject = {}
        for f in dataclasses.fields(self):
            if f.name in ("extra", "read_keys"):
                continue
            value = getattr(self, f.name)
            if self._written(f.name, value):
                out[f.name] = encode(value)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls: type[_T], d: Mapping[str, JSONValue], path: str = "") -> _T:
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "read_keys"}
        values: dict[str, object] = {}
        extra: JSONObject = {}
        for key, value in d.items():
            if key not in names:
                extra[key] = value
                continue
            try:
                values[key] = decode(hints[key], value, f"{path}.{key}" if path else key)
            except ResultFormatError:
                extra[key] = value  # an older writer's value: kept as written
        return cls(**values, extra=extra, read_keys=frozenset(d))

    @classmethod
    def from_json(cls: type[_T], value: Mapping[str, object]) -> _T:
        """The record of a mapping of Python values (numpy scalars, tuples, dataclasses...):
        its strict JSON form (:func:`fairengine.result_codec.encode`) read by :meth:`from_dict`."""
        data = encode(value)
        assert isinstance(data, dict)
        return cls.from_dict(data)


@dataclass(frozen=True)
class DataRoles(_Record):
    """The columns' roles in the audited table (:class:`fairengine.roles.ColumnRoles`)."""

    label: str | None = None
    protected: tuple[str, ...] = ()
    score: str | None = None
    features: tuple[str, ...] | None = None
    weight: str | None = None
    list_id: str | None = None
    """A ranking audit's list (query) id column (written only when set)."""
    _always: ClassVar[frozenset[str]] = frozenset(
        {"label", "protected", "score", "features", "weight"}
    )


@dataclass(frozen=True)
class DatasetSummary(_Record):
    """The audited data: where it came from (``name``, ``source``: a path, ``embedded:<name>``
    or ``pandas.DataFrame``), its size and content ``fingerprint``, the column ``roles``, how
    scores became predictions (``score_type``, ``threshold``, ``positive_label``), the label's
    rate and each protected attribute's group sizes (``groups[attribute][group]``), and the
    ``task`` of a regression audit."""

    name: str | None = None
    source: str | None = None
    n_rows: int | None = None
    fingerprint: str | None = None
    roles: DataRoles = field(default_factory=DataRoles)
    score_type: str | None = None
    threshold: float | None = None
    positive_label: JSONValue = None
    label_rate: float | None = None
    groups: dict[str, dict[str, int]] = field(default_factory=dict)
    task: str | None = None
    """``regression``, ``multiclass`` or ``ranking`` (``label_rate`` is then the mean target
    or relevance; None for a multiclass audit or a ranking without relevance); absent (None)
    for a binary audit."""
    _always: ClassVar[frozenset[str]] = frozenset(
        {
            "name",
            "source",
            "n_rows",
            "fingerprint",
            "score_type",
            "threshold",
            "positive_label",
            "label_rate",
        }
    )


@dataclass(frozen=True)
class ModelIdentity(_Record):
    """The audited model: its ``uri`` (``models:/name/3``, ``models:/name@alias``, ``runs:/``,
    a path, or ``python:<class>`` for an object given from Python; ``None`` when the scores are
    a data column), its registry ``name``, ``version``, ``alias`` and ``run_id``, an MLflow
    logged model's ``model_id``, a Python object's content ``fingerprint``, the
    ``score_source`` (``description`` is stated in the report) and ``model_input`` (columns,
    origin, conversions) of :mod:`fairengine.model_scores`, and the audit's ``score_type`` and
    ``threshold``.

    Written as a fresh audit writes it: ``uri``, ``name``, ``version``, ``score_type`` and
    ``threshold`` always, ``alias`` whenever a model was loaded (``uri`` set), the others when
    known.
    """

    uri: str | None = None
    name: str | None = None
    version: str | None = None
    alias: str | None = None
    run_id: str | None = None
    model_id: str | None = None
    fingerprint: str | None = None
    score_source: JSONObject | None = None
    model_input: JSONObject | None = None
    score_type: str | None = None
    threshold: float | None = None
    _always: ClassVar[frozenset[str]] = frozenset(
        {"uri", "name", "version", "score_type", "threshold"}
    )

    def _written(self, name: str, value: object) -> bool:
        loaded = name == "alias" and self.uri is not None and self.read_keys is None
        return loaded or super()._written(name, value)

    @property
    def score_description(self) -> str | None:
        """The score source in words (``score_source.description``), if recorded."""
        value = (self.score_source or {}).get("description")
        return None if value is None else str(value)


@dataclass(frozen=True)
class MitigationRegistration:
    """Whether the mitigated model was registered after the audit was logged, why (or why
    not), and its ``uri`` (:func:`tasks.after_logging.register_mitigated`)."""

    registered: bool
    reason: str
    uri: str | None = None


@dataclass(frozen=True)
class PreviousAudit(_Record):
    """An earlier finished audit of the same registered model, read from MLflow for the
    report's trend (:func:`tasks.mlflow_log.previous_audits`): its MLflow ``run_id`` and
    ``audit_id``, the audited ``model_version``, its ``verdict``, the run's start time
    (``started_ms``, Unix milliseconds) and the ``estimates`` it logged (finding key ->
    estimate); the newest one also has its ``decisions`` (finding key -> decision, ``None``
    when its ``audit.json`` could not be read)."""

    run_id: str | None = None
    audit_id: str | None = None
    model_version: str | None = None
    verdict: str | None = None
    started_ms: int | None = None
    estimates: dict[str, float] = field(default_factory=dict)
    decisions: dict[str, str] | None = None
    _always: ClassVar[frozenset[str]] = frozenset(
        {"run_id", "audit_id", "model_version", "verdict", "started_ms"}
    )


@dataclass(frozen=True)
class AuditMetadata(_Record):
    """How the audit ran: package ``versions``, ``fairengine_version``, the ``seed``, per-step
    ``timings`` in seconds, the ``previous_audits`` of the same registered model read from
    MLflow for the report's trend (``None`` when the store was not read), and the
    ``mitigation_registration`` outcome (``None`` when not asked for)."""

    versions: dict[str, str] = field(default_factory=dict)
    fairengine_version: str | None = None
    seed: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    previous_audits: list[PreviousAudit] | None = None
    mitigation_registration: MitigationRegistration | None = None
    _always: ClassVar[frozenset[str]] = frozenset({"fairengine_version", "seed"})

    def with_timing(self, step: str, seconds: float) -> AuditMetadata:
        """This metadata with ``timings[step] = seconds`` (a new object)."""
        return dataclasses.replace(self, timings={**self.timings, step: seconds})
