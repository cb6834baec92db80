"""Relaunch SGLang with the suggested fix and verify it.

``plan`` (pure: run + fixes -> argv) ─► ``launch`` (the only code in sglog that
starts processes) ─► ``live`` (the startup phases, read from the log as it is
written) ─► ``verify`` (pure: original vs new run -> verdict).
"""
