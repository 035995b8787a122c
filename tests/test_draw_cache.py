"""tasks.draw_cache: the decision step's further resamples are kept with the audit's cache."""

from __future__ import annotations

from pathlib import Path

from fairengine.decisions import BoundedResampler, FamilyTest, MonteCarloPart, decide_family
from tasks.draw_cache import CachedDraws


class Counting:
    """A deterministic bounded resampler (exceedances = batch // 7) that counts its draws."""

    def __init__(self) -> None:
        self.calls = 0

    def can_extend(self, key: str) -> bool:
        return key == "t"

    def max_resamples(self, key: str) -> int | None:
        return 3_000

    def cap_setting(self, key: str) -> str:
        return "test.cap"

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        self.calls += 1
        return batch // 7


def test_a_second_run_reads_every_batch_back(tmp_path: Path) -> None:
    tests = [FamilyTest("t", parts=(MonteCarloPart("permutation", 3, 49),))]
    first_inner = Counting()
    first = CachedDraws(first_inner, tmp_path, "identity-1")
    assert isinstance(first, BoundedResampler) and first.max_resamples("t") == 3_000
    assert first.cap_setting("t") == "test.cap"
    a = decide_family(tests, resampler=first)
    assert first_inner.calls > 0 and first.misses == first_inner.calls and first.hits == 0
    again_inner = Counting()
    again = CachedDraws(again_inner, tmp_path, "identity-1")
    b = decide_family(tests, resampler=again)
    assert again_inner.calls == 0 and again.hits == first.misses
    assert a.decisions == b.decisions
    other_inner = Counting()  # another identity (data, model, settings, seed or code changed)
    decide_family(tests, resampler=CachedDraws(other_inner, tmp_path, "identity-2"))
    assert other_inner.calls == first_inner.calls


def test_an_unreadable_file_is_drawn_again(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedDraws(inner, tmp_path, "x")
    assert cached.draw("t", "permutation", 49, 98) == 14
    for f in tmp_path.glob("*.json"):
        f.write_text("{not json")
    assert cached.draw("t", "permutation", 49, 98) == 14
    assert inner.calls == 2
