"""Renderers: they return strings or rich renderables; only the CLI writes."""
