"""How a run's phase reads in a lifecycle finding (also the diagnose renderer's words for where a log ends)."""

from __future__ import annotations

from sglog.schema import PHASE_WORDS as RUN_PHASE_WORDS

# how a phase reads in a finding: the run's words (sglog/runs/build.py), with the two a finding says differently
PHASE_WORDS = {
    **RUN_PHASE_WORDS,
    "launch": "launch (before any startup step)",
    "warmup": "warm-up (startup done, not yet ready)",
}


def phase_words(phase: str | None) -> str:
    return PHASE_WORDS.get(phase or "launch", phase or "launch")
