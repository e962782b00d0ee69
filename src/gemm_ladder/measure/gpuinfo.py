"""GPU state beside every figure: name, clocks, power, temperature, throttle reasons (NVML)."""
from __future__ import annotations

import re
from pathlib import Path

_THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
    0x100: "display_clocks",
}


class Nvml:
    """Reads one GPU's state; every method degrades to {} when NVML is unavailable."""

    def __init__(self, device_index: int = 0):
        self.handle = None
        self.error = ""
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            handle = None
            try:
                import torch
                props = torch.cuda.get_device_properties(device_index)
                bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
            except Exception:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self.handle = handle
        except Exception as e:  # no NVML (CPU machine) or no permission
            self.error = f"{type(e).__name__}: {e}"

    def static(self) -> dict:
        if self.handle is None:
            return {"nvml_error": self.error}
        nv, h = self.nv, self.handle
        out = {}
        for key, fn in (("name", lambda: nv.nvmlDeviceGetName(h)),
                        ("driver", lambda: nv.nvmlSystemGetDriverVersion()),
                        ("power_limit_w", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
                        ("max_sm_clock_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("max_mem_clock_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM))):
            try:
                v = fn()
                out[key] = v.decode() if isinstance(v, bytes) else v
            except Exception:
                pass
        return out

    def sample(self) -> dict:
        if self.handle is None:
            return {}
        nv, h = self.nv, self.handle
        out = {}
        try:
            out["sm_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            out["mem_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
            out["power_w"] = round(nv.nvmlDeviceGetPowerUsage(h) / 1000, 1)
            out["temp_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        except Exception:
            pass
        try:
            get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nv.nvmlDeviceGetCurrentClocksThrottleReasons
            bits = get(h)
            out["throttle"] = [n for b, n in _THROTTLE_BITS.items() if bits & b] or ["none"]
        except Exception:
            pass
        return out


class Sampler:
    """NVML samples taken on a thread *during* a timed loop (a sample after it describes a card
    already idling): `with Sampler(nvml) as s: ...` then `s.summary()` — medians of SM clock
    and power, the peak temperature, every throttle reason seen, the sample count."""

    def __init__(self, nvml: Nvml, period_s: float = 0.05):
        self.nvml, self.period_s = nvml, period_s
        self.samples: list[dict] = []
        self._stop = None
        self._thread = None

    def __enter__(self):
        import threading
        self._stop = threading.Event()

        def loop():
            while not self._stop.is_set():
                if s := self.nvml.sample():
                    self.samples.append(s)
                self._stop.wait(self.period_s)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def summary(self) -> dict:
        import statistics
        if not self.samples:
            return {}
        out = {"samples": len(self.samples)}
        for key in ("sm_clock_mhz", "power_w"):
            xs = [s[key] for s in self.samples if key in s]
            if xs:
                out[key] = statistics.median(xs)
        temps = [s["temp_c"] for s in self.samples if "temp_c" in s]
        if temps:
            out["temp_c_max"] = max(temps)
        out["throttle"] = sorted({r for s in self.samples for r in s.get("throttle", [])})
        return out


def gpu_token(result: dict) -> str:
    """The record's GPU as a file name's token: 'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' -> 'h100';
    'gpu' when the record names none."""
    gpu = result.get("gpu", {})
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu.get("torch_name", "") or gpu.get("name", ""))
    return m.group(1).lower() if m else "gpu"


def record_path(out_dir, result: dict, kind: str) -> Path:
    """benchmarks/results/<date>_<gpu>_<kind>_<commit>.json: every record named by the card that ran it."""
    commit = result["commit"]
    short = commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")
    return Path(out_dir) / f"{result['date'][:10]}_{gpu_token(result)}_{kind}_{short}.json"
