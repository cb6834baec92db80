"""Capacity rules: KV and hybrid (SWA / mamba) pools too small for the requests they serve."""
