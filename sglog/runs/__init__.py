"""Events -> runs: one run per server launch (``build``), and which release's formats it was read
with (``formats``)."""
