"""Findings in time (SGL6xx): what changed part-way through a run, and when.

The other rules read a run's steady state as a whole; these read its timeline in windows
(``sglog.timeline.series_windows``) and report the first sustained change against the run's
earlier level, with the window it happened in and the numbers before and after.  One rule per
module; what they share is in ``change``.
"""

from __future__ import annotations

from sglog.rules.serving.acceptance_drop import AcceptanceDrop
from sglog.rules.serving.cache_hit_collapse import CacheHitCollapse
from sglog.rules.serving.queue_growth import QueueGrowth
from sglog.rules.serving.retraction_spike import RetractionSpike
from sglog.rules.serving.throughput_drop import ThroughputDrop
from sglog.rules.serving.ttft_regression import TtftRegression

__all__ = ["AcceptanceDrop", "CacheHitCollapse", "QueueGrowth", "RetractionSpike", "ThroughputDrop", "TtftRegression"]
