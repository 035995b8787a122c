"""Streamed audits of data larger than memory (issue 21): one pass over Parquet or CSV files in
record batches, each checked against the data contract, scored, folded exactly into the count
tables of the count-based methods, and offered to a stratified sample for the methods that need
rows.

>>> counts = stream_counts("data/*.parquet", roles, threshold=0.5, sample_rows=100_000)
>>> group_parity_from_counts(counts)            # fairengine.group_parity
>>> run_group_metrics_from_counts(counts, cfg)  # fairengine.group_metrics
>>> run_permutation_tests_from_counts(counts, cfg, seed=0)  # fairengine.permutation
>>> run_intersectional_from_counts(counts, cfg, seed=0)     # fairengine.intersectional
>>> rows = self_weighting_subsample(counts.sample, "y", files=counts.files)
>>> rows.frame, rows.fraction, rows.strata   # every row included with probability ≈ f

Modules: :mod:`.sources` (files and record batches), :mod:`.contract` (per-batch checks),
:mod:`.scoring` (a score column or a model per batch), :mod:`.folding` (categories across
batches, exact merging), :mod:`.tables` (the tables the methods read), :mod:`.sample` (the
stratified reservoir sample), :mod:`.self_weighting` (its self-weighting subsample, for the
methods that need rows), :mod:`.stream` (the pass).
"""

from fairengine.streaming.sample import StratifiedSample
from fairengine.streaming.self_weighting import SelfWeightingSample, self_weighting_subsample
from fairengine.streaming.sources import StreamSource
from fairengine.streaming.stream import DEFAULT_BINS, stream_counts
from fairengine.streaming.tables import StreamedCounts

__all__ = [
    "DEFAULT_BINS",
    "SelfWeightingSample",
    "StratifiedSample",
    "StreamSource",
    "StreamedCounts",
    "self_weighting_subsample",
    "stream_counts",
]
