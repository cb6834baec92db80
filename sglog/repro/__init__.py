"""Relaunch SGLang with the suggested fix and verify it.

``sglog.relaunch`` (pure: run + fixes -> argv, built at the diagnose stage, which shows it)
─► ``launch`` (the only code in sglog that starts processes) ─► ``live`` (the startup phases, read from the log as it is
written) ─► ``verify`` (pure: original vs new run -> verdict).
"""
