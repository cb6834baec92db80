"""Request rules: what happened to requests the server could not take as sent."""
