"""Runs and findings are frozen (#30): a stage that wants a different one builds a new one."""

from __future__ import annotations

import dataclasses

import pytest

import sglog
from conftest import STORY
from sglog.diagnose import diagnose_runs
from sglog.findings import Evidence, Finding, Fix, Superseded

LOG = STORY / "eagle3-oom-auto.log"


def test_a_run_cannot_be_changed():
    run = sglog.load(LOG)[0]
    for attr, value in (("index", 9), ("ending", None), ("version", "0.0.1"), ("startup", None), ("label", "x")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(run, attr, value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        del run.args


def test_a_runs_memory_budget_cannot_be_changed():
    """The budget is built whole (runs.build._memory), the same values as when it was set field by field."""
    memory = sglog.load(LOG)[0].memory
    with pytest.raises(dataclasses.FrozenInstanceError):
        memory.total_gb = 1.0  # type: ignore[misc]  (the point: a frozen field)
    assert memory.mem_fraction_static == 0.76 and memory.total_gb is not None and memory.target_weights_gb is not None


def test_with_facts_is_a_new_run_that_keeps_the_memo():
    run = sglog.load(LOG)[0]
    decode = run.decode  # (memoised)
    other = run.with_facts(label="renamed")
    assert other is not run and other.name == "renamed" and run.name != "renamed"
    assert other.decode is decode  # (the memo is kept: the same events and frames)
    copy = dataclasses.replace(run, index=7)  # (what a window's cut does: its own, empty memo)
    assert copy.index == 7 and run.index != 7 and copy._memo == {} and run._memo


def test_findings_cannot_be_changed():
    findings = diagnose_runs(sglog.load(LOG))
    assert findings
    f = findings[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.message = "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.evidence[0].text = "x"
    fix = Fix("a fix", {"--tp": "2"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        fix.summary = "x"
    for obj, attr in ((Evidence("f.log", 1, "t"), "line"), (Finding("SGL1", "r", "info", "m", 1), "run"), (Superseded("--tp", "1", "r", "2", "why"), "by")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, None)


def test_a_runs_startup_and_ending_cannot_be_changed():
    """The startup phases are read as spans and frozen whole (runs.build._startup); the ending is built whole."""
    run = sglog.load(LOG)[0]
    startup, ending = run.startup, run.ending
    assert startup is not None and ending is not None and startup.phases
    phase = next(iter(startup.phases.values()))
    span = next(iter(phase.per_rank.values()))
    for obj, attr in ((startup, "ready"), (phase, "name"), (span, "end"), (ending, "status"), (ending, "root_cause")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, None)
    assert ending.status == "crashed" and phase.duration is not None
