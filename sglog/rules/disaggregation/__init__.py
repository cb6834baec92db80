"""Disaggregation rules: prefill-decode (PD) deployments and their KV transfer."""
