"""What users call and the hot path: the public API (api), the per-call path and its prepared
configurations (fastpath, fastconfig), operand layout and staging, the kernel choice (select),
the torch custom op (torch_ops) and the strict runner of one kernel (runner)."""
