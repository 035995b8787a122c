"""Intersections of protected attributes as one group encoding.

The intersection of attributes A_1..A_k (with G_1..G_k groups) has one group per *observed*
combination of their groups. Codes are combined in mixed radix,

    j = ((c_1 · G_2 + c_2) · G_3 + c_3) · …,

and the observed values of j are renumbered 0..C−1 in increasing order (so cells sort by the
first attribute, then the second, …). Unobserved combinations are not groups: an audit cannot
say anything about a group without rows. The cell label joins the group labels with " & ",
and the attribute name joins the attribute names the same way (``"race & sex"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.counts import index_dtype
from fairengine.dataset import GroupEncoding
from fairengine.errors import DataContractError

SEPARATOR = " & "
DEFAULT_MAX_CELLS = 64


@dataclass(frozen=True)
class Intersection:
    """The intersection encoding plus, for each cell, the group code of every part.

    ``members[c, i]`` is the code (in ``parts[i]``) of cell c's group on the i-th attribute.
    """

    encoding: GroupEncoding
    parts: tuple[GroupEncoding, ...]
    members: np.ndarray

    @property
    def attribute(self) -> str:
        return self.encoding.attribute


def joint_codes(parts: Sequence[GroupEncoding]) -> tuple[np.ndarray, int]:
    """Mixed-radix combination of the parts' codes (in the smallest unsigned dtype that holds
    it) and the number of possible combinations."""
    if not parts:
        raise DataContractError("an intersection needs at least one attribute")
    n = parts[0].codes.shape[0]
    for p in parts:
        if p.codes.shape != (n,):
            raise DataContractError(
                f"attribute {p.attribute!r} has {p.codes.shape[0]} codes, expected {n}"
            )
    total = 1
    for p in parts:
        total *= p.n_groups
    if total >= 2**62:
        raise DataContractError("too many possible group combinations to encode")
    j = parts[0].codes.astype(index_dtype(total - 1), copy=True)
    for p in parts[1:]:
        j *= p.n_groups
        np.add(j, p.codes, out=j, casting="unsafe")  # codes < n_groups: no overflow
    return j, total


def intersect_groups(
    parts: Sequence[GroupEncoding],
    *,
    max_cells: int = DEFAULT_MAX_CELLS,
    name: str | None = None,
) -> Intersection:
    """The :class:`Intersection` of ``parts`` (observed combinations only).

    Raises :class:`DataContractError` when the attributes have different lengths, when an
    attribute is repeated, or when the number of observed cells exceeds ``max_cells`` (naming
    the count and the attributes, so the user can drop an attribute or coarsen groups).
    """
    parts = tuple(parts)
    names = [p.attribute for p in parts]
    if len(set(names)) != len(names):
        raise DataContractError(f"intersection attributes must be distinct, got {names}")
    if not isinstance(max_cells, int | np.integer) or max_cells < 1:
        raise DataContractError(f"max_cells must be a positive integer, got {max_cells!r}")
    j, total = joint_codes(parts)
    if total <= 4 * j.shape[0] + 1024:
        present = np.flatnonzero(np.bincount(j, minlength=total))
        if present.size > max_cells:
            _too_many(present.size, names, max_cells)
        dtype = index_dtype(present.size - 1)
        lookup = np.zeros(total, dtype=dtype)
        lookup[present] = np.arange(present.size, dtype=dtype)
        codes = lookup[j]
    else:  # sparse combination space: sort-based
        present, codes = np.unique(j, return_inverse=True)
        if present.size > max_cells:
            _too_many(present.size, names, max_cells)
        codes = codes.astype(index_dtype(present.size - 1))
    members = np.empty((present.size, len(parts)), dtype=np.intp)
    rest = present.astype(np.int64)
    for i in range(len(parts) - 1, -1, -1):
        members[:, i] = rest % parts[i].n_groups
        rest //= parts[i].n_groups
    categories = tuple(
        SEPARATOR.join(parts[i].categories[members[c, i]] for i in range(len(parts)))
        for c in range(present.size)
    )
    enc = GroupEncoding(name or SEPARATOR.join(names), codes, categories)
    return Intersection(enc, parts, members)


def _too_many(cells: int, names: list[str], max_cells: int) -> None:
    raise DataContractError(
        f"the intersection of {names} has {cells} non-empty cells, more than max_cells="
        f"{max_cells}; drop an attribute, merge small groups, or raise max_cells"
    )
