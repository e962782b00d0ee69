"""The CUDA layer: NVRTC compilation and its disk cache (jit), the driver (modules, tensor maps,
launches), the device's facts (device), and the enums the kernels and Python share."""
