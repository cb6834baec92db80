"""Memory rules (SGL1xx): how the GPU memory budget was split, and the OOMs that follow.

Notation used in the docs (all per GPU, GB; the minimum over ranks for free
memory, the maximum for what was used):

* `T`: free memory when the weights start loading (`Load weight begin. avail mem`),
  what SGLang budgets `--mem-fraction-static` against;
* `A_w`: free after the target weights (`Load weight end. avail mem`); `T - A_w` is
  what weights and runtime use before the KV pool is sized;
* `K`: KV pool size, `bytes/token` = K / #tokens (`KV Cache is allocated`);
* `G`: CUDA-graph memory (`Capture ... end. mem usage`); `W_d`: draft weights;
* `F`: `available_gpu_mem` in the ready summary; `H`: activation headroom
  (SGLang's tuning guide: keep 5-8 GB free).

One rule per module, named after the rule; what they share is in ``budget``.
"""
