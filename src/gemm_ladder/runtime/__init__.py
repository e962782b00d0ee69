"""Compile, load and launch the ladder's kernels: step registry, NVRTC JIT, driver, public API."""
