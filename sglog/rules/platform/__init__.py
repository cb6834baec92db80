"""Platform rules (SGL4xx): the GPU, its kernels, the collectives and the installed packages
(kv-transfer-failed, SGL405, is in ``disaggregation``).

One rule per module, named after the rule.
"""
