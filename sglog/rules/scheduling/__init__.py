"""Scheduling rules (SGL2xx): what the decode lines say about KV capacity, queueing and CUDA graphs.

One rule per module, named after the rule; what they share is in ``usage``.
"""
