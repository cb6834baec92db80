"""Disaggregation rules: prefill-decode (PD) deployments and their KV transfer.

One rule per module, named after the rule.
"""
