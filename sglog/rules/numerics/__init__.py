"""Numerics rules: non-finite values in the model's outputs."""
