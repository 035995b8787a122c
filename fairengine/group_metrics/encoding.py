"""What the LiFT suite audits one at a time: a protected attribute, or the intersection of all
of them (an "encoding" of the rows into groups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fairengine.counts import GroupLabelMoments
from fairengine.finding_keys import intersection_token, key_token
from fairengine.intersection import SEPARATOR


@dataclass
class Encoding:
    """One audited grouping: its ``name`` (the attribute's, or the intersection's, whose group
    names join the attributes' with " & "), its ``kind``, its sufficient statistics and, when
    a step needs them (exact AUC, custom metrics), the per-row group codes."""

    name: str
    kind: Literal["attribute", "intersection"]
    moments: GroupLabelMoments
    codes: np.ndarray | None = None

    @property
    def token(self) -> str:
        """The key token of the encoding's name (findings ``<metric>.<token>``)."""
        return self.name_token(self.name)

    def name_token(self, name: str) -> str:
        """Key token of an attribute or group name; for the intersection, whose names join
        attribute (group) names with " & ", the tokens of the parts joined by ``_x_``."""
        if self.kind == "intersection":
            return intersection_token(name.split(SEPARATOR))
        return key_token(name)
