"""Record ``tests/data/two_group_paths.npz``, the fixture of ``tests/test_two_group_paths.py``.

Run from the repository root: ``.venv/bin/python tests/data/make_two_group_paths.py``. It
imports the test module for its case list and runs each case through the current
``fairengine.permutation.two_group.permutation_test``; the committed fixture was recorded from
the code before the strategy refactor (commit 6ee3cc2), with numpy 2.4.6 and torch 2.13.0+cpu,
and re-recorded after the subset masks' new random draws (commits 9519084, ecbaa79; 65 of the
188 cases, the cell-count path, unchanged).
Regenerate it only for an intended change of behaviour.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import test_two_group_paths as t  # noqa: E402


def main() -> None:
    np.savez_compressed(t.FIXTURE, **t.pack())
    print(f"{len(t.CASES)} cases, {len(t.ERRORS)} errors -> {t.FIXTURE}")


if __name__ == "__main__":
    main()
