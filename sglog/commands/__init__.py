"""One module per CLI command; each registers itself on ``sglog.cli.app``."""
