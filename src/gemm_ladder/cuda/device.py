"""The device's facts, read from the device in one place (once per device index), and the H200
defaults the models use when there is no GPU.

The cost model, the small-M family's deal and the simulator are pure functions of these facts;
they take the H200's figures (`H200`) unless a caller reads the device's (`num_sms`,
`max_smem_per_block`).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import driver


@dataclass(frozen=True)
class DeviceFacts:
    """What the models need of a GPU."""
    sms: int  # streaming multiprocessors
    smem_per_block: int  # the opt-in limit of dynamic + static shared memory per block, bytes
    peak_tflops: float  # dense fp16/bf16 tensor-core peak
    hbm_tbs: float  # HBM bandwidth, TB/s
    l2_bytes: int  # the L2 cache as the device reports it (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
    source: str
    copy_tbs: float = 0.0  # measured: a device-to-device copy's bytes read + written per second, TB/s


# The H200 SXM: 132 SMs, 227 KB of shared memory per block (opt-in), the datasheet's dense
# fp16/bf16 peak and HBM3e bandwidth; the copy rate measured beside every suite run
# (benchmarks/results/2026-12-03_h200_suite_all_e7560a9.json: 4.25 TB/s); its L2 as the device
# reports it, 60 MiB (the suite records' `memory.l2_bytes`, e.g. 2026-12-05_h200_suite_all_07e9797.json;
# the H100's 50 MiB). On a GPU the library asks the device (l2_bytes() below); these facts serve the CPU.
H200 = DeviceFacts(sms=132, smem_per_block=232_448, peak_tflops=989.0, hbm_tbs=4.8, l2_bytes=60 * 2**20,
                   source="H200 SXM datasheet", copy_tbs=4.25)
# The H100 SXM (80 GB HBM3): the H200's SMs, shared memory and tensor cores on slower HBM. The models
# never take it by default; it is the card a cost-model record is held to when the suite ran there
# (scripts/costmodel_record.py: the copy rate then comes from the suite record, 3.0 TB/s at ec01370).
H100 = DeviceFacts(sms=132, smem_per_block=232_448, peak_tflops=989.0, hbm_tbs=3.35, l2_bytes=50 * 2**20,
                   source="H100 SXM datasheet", copy_tbs=3.0)
CARDS = {"h200": H200, "h100": H100}  # by the token a record's file name carries (measure/gpuinfo.gpu_token)

_SMS: dict[int, int] = {}
_SMEM: dict[int, int] = {}
_L2: dict[int, int] = {}


def num_sms(device_index: int) -> int:
    """The device's SM count (read once per device)."""
    if device_index not in _SMS:
        import torch
        _SMS[device_index] = torch.cuda.get_device_properties(device_index).multi_processor_count
    return _SMS[device_index]


def max_smem_per_block(device_index: int) -> int:
    """The device's opt-in shared memory per block, in bytes (read once per device)."""
    if device_index not in _SMEM:
        driver.ensure_context(device_index)
        _SMEM[device_index] = driver.device_attribute(device_index, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    return _SMEM[device_index]


def l2_bytes(device_index: int) -> int:
    """The device's L2 cache in bytes (read once per device)."""
    if device_index not in _L2:
        driver.ensure_context(device_index)
        _L2[device_index] = driver.device_attribute(device_index, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")
    return _L2[device_index]
