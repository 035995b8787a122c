"""Finding keys: flat, unique, MLflow-valid metric names built from group and attribute names.

Every :class:`~fairengine.results.Finding` has a ``key`` such as ``dp_gap.sex.female_male``;
:meth:`~fairengine.results.AuditResult.flat_metrics` turns it into MLflow metrics (the key and
``key.ci_low``, ``key.ci_high``, ``key.pvalue``, ``key.pvalue_adj``). Two findings of one audit
must never share a key, or MLflow keeps one value and silently drops the other. Keys are built
from *tokens* of names chosen by the user (attributes, groups, custom metrics), so the token map
must be injective and its output safe inside a key.

**The token of a name** (:func:`key_token`). Let ``W = [A-Za-z0-9-]+``.

* *Readable* names, ``W`` words joined by single underscores (``female``, ``Female``,
  ``African-American``, ``25-45``, ``-1``, ``age_group``), are kept, with each ``_`` doubled:
  ``age_group`` -> ``age__group``. A name qualifies only if its token has at most
  :data:`MAX_TOKEN_LENGTH` characters, is not a flat-metric suffix word (``pvalue``) and does
  not end like a hashed token (below).
* Every other name (non-ASCII ``白人``, ``🙂``; spaces or punctuation ``Female ``, ``<30``;
  ``a__b``; the empty string; long names) becomes ``<slug>-x<h>``, or ``x<h>`` when the slug is
  empty: ``slug`` is a readable ASCII rendering (accents dropped, other runs of characters outside
  ``[A-Za-z0-9]`` replaced by one ``-``, cut so the token fits :data:`MAX_TOKEN_LENGTH`) and
  ``h`` is the first :data:`HASH_HEX` hex digits of SHA-256 of the exact name (UTF-8):
  ``白人`` -> ``xe504e08c``, ``<30`` -> ``30-x…``, ``Ünïcödé`` -> ``Unicode-x…``.

Why it is injective. (i) Readable -> readable: doubling ``_`` is invertible. (ii) Readable vs
hashed: a hashed token matches ``(^|-)x[0-9a-f]{8}$`` (:data:`HASHED`); a readable token never
does, because a name whose readable token would match it is hashed instead. (iii)
Hashed vs hashed: two different names get different tokens unless their SHA-256 prefixes
collide; with 32 bits that has probability about n²/2³³ among n hashed names of one audit
(1e-4 at n = 1,000), and :func:`check_unique_keys` turns any such collision into an error
instead of a lost metric. Cases (i) and (ii) need no hash at all: plain names never collide.

**Joining tokens.** A token is never empty, never starts or ends with ``_``, and its runs of
``_`` have length exactly 2 (readable) or 0 (hashed slugs hold no ``_``). So in ``t1_t2`` (a pair
of groups, :func:`pair_token`) the separator is the only run of exactly one ``_``, and in
``t1_x_t2_x_t3`` (an intersection, :func:`intersection_token`) the separators are the runs of one
``_``: both joins decode uniquely, so ``(a, b) -> pair_token(a, b)`` is injective, whereas the
old single-``_`` scheme mapped (``a_b``, ``c``) and (``a``, ``b_c``) to the same key. Tokens
hold no ``.``, so the ``.``-separated parts of a key are recovered too. A name that is never
joined with another one (a metric name in ``perm_<metric>``) uses :func:`part_token`, which
keeps ``_`` as is (``perm_positive_rate``); otherwise it follows the same rules.

Attribute and group names share one token function because ``fairengine.group_parity`` builds
``<prefix>.<attr>.<a>_<b>`` with it for both, so an attribute named ``age_group`` reads
``age__group`` in every key.

**Validity.** MLflow 3 (``mlflow.utils.validation._validate_metric_name``) accepts names
matching ``^[/\\w.\\- :]*$`` (no ``:`` on Windows) that ``posixpath.normpath`` leaves unchanged
and that do not start with ``/`` or ``..``; ``_validate_metric`` caps them at 250 characters.
Tokens use ``[A-Za-z0-9_-]`` only and key parts are never empty, so keys are valid; lengths
are bounded by :data:`MAX_TOKEN_LENGTH` and :data:`MAX_JOINED_LENGTH` so that the longest key
plus ``.pvalue_adj`` stays within 250. :func:`check_unique_keys` re-checks all of this for every
audit (an internal invariant: a failure is a FairEngine bug, not bad input).

Case is kept (``Female`` and ``female`` are different keys), as MLflow's SQLite and PostgreSQL
stores compare metric names case-sensitively; a store that does not (a file store on a
case-insensitive file system, MySQL with a case-insensitive collation) would merge such keys.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol


class KeyedFinding(Protocol):
    """What the key checks read of a :class:`~fairengine.results.Finding` (which imports this
    module, so it is named by shape here, not imported)."""

    @property
    def key(self) -> str: ...

    @property
    def label(self) -> str: ...


#: Suffixes :meth:`~fairengine.results.AuditResult.flat_metrics` appends to a finding's key.
FLAT_SUFFIXES: tuple[str, ...] = ("ci_low", "ci_high", "pvalue", "pvalue_adj")
#: Run-level metrics :mod:`tasks.mlflow_log` logs beside the flat metrics; no key may take them.
RUN_METRIC_NAMES: frozenset[str] = frozenset(
    {"verdict_fail", "tests_rejected", "tests_undetermined"}
)
#: MLflow's limit on a metric name (``mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH``).
MAX_METRIC_NAME_LENGTH = 250
#: Longest token of one name; longer names are shortened with a hash.
MAX_TOKEN_LENGTH = 40
#: Longest joined token (an intersection of several attributes or groups).
MAX_JOINED_LENGTH = 100
#: Hex digits of SHA-256 in a hashed token.
HASH_HEX = 8
PAIR_SEPARATOR = "_"
INTERSECTION_SEPARATOR = "_x_"

_READABLE = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
_READABLE_PART = re.compile(r"[A-Za-z0-9_-]+")
HASHED = re.compile(rf"(?:^|-)x[0-9a-f]{{{HASH_HEX}}}$")
_NOT_SLUG = re.compile(r"[^A-Za-z0-9]+")
# MLflow 3's accepted characters (validation.validate_param_and_metric_name), Windows variant.
_MLFLOW_NAME = re.compile(r"^[/\w.\- ]*$")
_RESERVED = frozenset(FLAT_SUFFIXES)


class FindingKeyError(RuntimeError):
    """Two findings of one audit share a key, or a key is not a valid MLflow metric name.

    An internal invariant: keys are unique and valid by construction (:func:`key_token`), so
    this is a bug in FairEngine to report, not a problem with the data.
    """


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]


def _slug(text: str, limit: int) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_SLUG.sub("-", ascii_text).strip("-")[:limit].rstrip("-")


def _hashed(readable: str, original: str, limit: int) -> str:
    """``<slug>-x<hash>`` (``x<hash>`` for an empty slug) of at most ``limit`` characters."""
    h = _digest(original)
    slug = _slug(readable, limit - HASH_HEX - 2)
    return f"{slug}-x{h}" if slug else f"x{h}"


def key_token(value: object) -> str:
    """The token of a group, attribute or metric name inside a finding key (injective).

    ``female`` -> ``female``; ``African-American`` -> ``African-American``; ``age_group`` ->
    ``age__group``; anything else -> a readable slug plus ``-x`` and 8 hex digits of SHA-256 of
    the exact name (``Female `` -> ``Female-x…``, ``白人`` -> ``x…``). See the module docstring
    for why distinct names always get distinct tokens.
    """
    name = str(value)
    if _READABLE.fullmatch(name) and name not in _RESERVED:
        token = name.replace("_", "__")
        if len(token) <= MAX_TOKEN_LENGTH and not HASHED.search(token):
            return token
    return _hashed(name, name, MAX_TOKEN_LENGTH)


def part_token(value: object) -> str:
    """The token of a name that fills a whole ``.``-separated part of a key, or a part after a
    fixed prefix, and is never joined with another token: a metric name in
    ``perm_<metric>.<attr>.<a>_<b>``, a benefit-vector name. Like :func:`key_token` but ``_`` is
    kept (``positive_rate``), since no join has to be decoded; injective by the same argument.
    """
    name = str(value)
    if (
        _READABLE_PART.fullmatch(name)
        and name not in _RESERVED
        and len(name) <= MAX_TOKEN_LENGTH
        and not HASHED.search(name)
    ):
        return name
    return _hashed(name, name, MAX_TOKEN_LENGTH)


def pair_token(a: object, b: object) -> str:
    """``<token a>_<token b>``: injective in (a, b) because tokens hold no single ``_``."""
    return f"{key_token(a)}{PAIR_SEPARATOR}{key_token(b)}"


def intersection_token(names: Sequence[object]) -> str:
    """``<t1>_x_<t2>_x_…`` for an intersection of attributes (or of their groups).

    Injective in the sequence of names (the separators are the only single-``_`` runs). Above
    :data:`MAX_JOINED_LENGTH` characters it is cut and ends in ``-x`` plus a hash of the exact
    sequence, like a long single name.
    """
    if not names:
        raise ValueError("intersection_token needs at least one name")
    joined = INTERSECTION_SEPARATOR.join(key_token(n) for n in names)
    if len(joined) <= MAX_JOINED_LENGTH:
        return joined
    exact = json.dumps([str(n) for n in names], ensure_ascii=False)  # injective in the list
    return _hashed(joined, exact, MAX_JOINED_LENGTH)


def metric_name_problem(name: str) -> str | None:
    """Why MLflow 3 would reject ``name`` as a metric name, or ``None`` if it accepts it.

    The rules of ``mlflow.utils.validation._validate_metric_name`` (characters, path
    normalisation; Windows' stricter character set) and ``_validate_metric`` (length).
    """
    if not name:
        return "is empty"
    if not _MLFLOW_NAME.match(name):
        return "has characters outside letters, digits, '_', '-', '.', ' ' and '/'"
    norm = posixpath.normpath(name)
    if norm != name or norm == "." or norm.startswith("..") or norm.startswith("/"):
        return f"would resolve to the path {norm!r}"
    if len(name) > MAX_METRIC_NAME_LENGTH:
        return f"has {len(name)} characters, more than MLflow's {MAX_METRIC_NAME_LENGTH}"
    return None


def flat_names(key: str) -> list[str]:
    """The MLflow metric names a finding keyed ``key`` may produce: the key and its suffixes."""
    return [key, *(f"{key}.{s}" for s in FLAT_SUFFIXES)]


def check_unique_keys(findings: Iterable[KeyedFinding]) -> None:
    """Raise :class:`FindingKeyError` unless the findings' keys are unique and every flat
    metric name they produce (key and ``.ci_low`` …) is distinct, valid for MLflow and not one
    of :data:`RUN_METRIC_NAMES`.

    The message lists each duplicated name with the labels of the findings that share it.
    """
    owners: dict[str, list[str]] = defaultdict(list)
    invalid: list[str] = []
    for f in findings:
        for name in flat_names(f.key):
            owners[name].append(f"{f.label!r} (key {f.key!r})")
            problem = (
                "is reserved for a run-level metric"
                if name in RUN_METRIC_NAMES
                else metric_name_problem(name)
            )
            if problem is not None:
                invalid.append(f"{name!r} {problem} (finding {f.label!r})")
    duplicated = {n: who for n, who in owners.items() if len(who) > 1}
    if not duplicated and not invalid:
        return
    lines = [f"{n!r} from {', '.join(who)}" for n, who in sorted(duplicated.items())]
    raise FindingKeyError(
        "internal error (a FairEngine bug, please report it): finding keys must be unique, "
        "valid MLflow metric names"
        + (f"; {len(duplicated)} name(s) shared: " + "; ".join(lines[:20]) if lines else "")
        + (f"; {len(invalid)} invalid: " + "; ".join(invalid[:20]) if invalid else "")
    )
