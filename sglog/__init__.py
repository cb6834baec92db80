"""sglog: log forensics and post-mortems for SGLang inference servers.

Notebook API::

    import sglog
    runs = sglog.load("server.log")          # or a list of files (one per node)
    run = runs[0]
    run.events                               # typed events (list of sglog.events.Event)
    run.batches                              # polars frame of decode/prefill batch lines (one file: kind by kind,
                                             #   each kind in line order; several files: in time order)
    run.decode, run.prefill                  # the rows of one kind
    run.startup.to_dict(), run.memory.to_dict(), run.ending.describe()
    sglog.timeline.windows(run, "1m")        # polars frame of serving windows
"""

from __future__ import annotations

__version__ = "0.1.0"


def load(paths, **kw):
    """Parse one log (or several files of one launch) into a list of runs."""
    from sglog.runs.build import load_runs

    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    return load_runs([str(p) for p in paths], **kw)


def __getattr__(name):
    if name == "timeline":
        import importlib

        return importlib.import_module("sglog.timeline")
    raise AttributeError(name)
