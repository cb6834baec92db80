"""The reader: lines -> envelope and records -> typed events (grammar, then the message catalogue)."""
