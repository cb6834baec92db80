"""Lifecycle rules (SGL5xx): how a run started, how long it took, how it ended.

One rule per module, named after the rule; what they share is in ``phases``.
"""
