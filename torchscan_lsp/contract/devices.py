"""Accelerators a plan or a roofline can name: memory, memory bandwidth and dense peak FLOP/s.

One table for every option that names a device (a plan's memory budget ``"A100-40GB"``, a
roofline's ``"H100-SXM"``), standard library only, so that the source reader checks a name before
anything runs. Every figure is the vendor's published specification for the board (docs/devices.md
gives each one's source); peak FLOP/s are **dense** (never the 2:4-sparsity figure the same
datasheets print beside them), per dtype of the tensor-core (or matrix-core) path; ``float32`` is
the rate a float32 matmul runs at by default (NVIDIA: the CUDA cores, since PyTorch uses no TF32
for matmuls unless asked; AMD: the FP32 matrix cores), ``float64`` that of an FP64 matmul (the FP64
tensor or matrix cores where a board has them).

Names are matched without regard to case, ``_`` and spaces (``"rtx 4090"`` is ``"RTX-4090"``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["DEVICES", "DTYPES", "Device", "device_names", "dtype_key", "find_device", "lookup_device"]

GiB = 1 << 30
TERA = 1e12

#: The dtype keys of :attr:`Device.peak_flops`: ``torch`` dtype names, plus ``tfloat32`` (float32
#: matmuls on tensor cores, ``torch.backends.cuda.matmul.allow_tf32``) and ``float8`` (e4m3/e5m2).
DTYPES = ("float64", "float32", "tfloat32", "bfloat16", "float16", "float8")


@dataclass(frozen=True)
class Device:
    """One accelerator's published ceilings.

    Attributes:
        name: the canonical name, e.g. ``"H100-SXM"``.
        aliases: other names it answers to (``"H100-80GB"``).
        memory_bytes: on-board memory in bytes (the nominal capacity; the driver and the CUDA
            context keep a few hundred MiB of it).
        bandwidth: peak memory bandwidth in bytes per second.
        peak_flops: dense peak FLOP/s per dtype key of :data:`DTYPES`; a dtype the device has no
            fast path for is absent.
        source: the vendor document the figures come from (docs/devices.md names its table).
    """

    name: str
    aliases: tuple[str, ...]
    memory_bytes: int
    bandwidth: float
    peak_flops: Mapping[str, float] = field(default_factory=dict)
    source: str = ""

    def peak(self, dtype: str) -> float | None:
        """The dense peak FLOP/s of ``dtype`` (a :data:`DTYPES` key or a ``torch`` dtype name, with or
        without ``torch.``: :func:`dtype_key`), or ``None`` when the table has no figure for it."""
        key = dtype_key(dtype)
        return self.peak_flops.get(key) if key is not None else None


def _device(name: str, aliases: tuple[str, ...], memory_gib: float, bandwidth_gb_s: float, source: str,
            **tflops: float) -> Device:
    return Device(name, aliases, int(memory_gib * GiB), bandwidth_gb_s * 1e9,
                  {dtype: value * TERA for dtype, value in tflops.items()}, source)


#: The table. Units in the calls: GiB (the boards' "GB" of HBM and GDDR are binary: an "80 GB"
#: H100 holds 80 GiB), GB/s (10^9 bytes per second) and dense TFLOP/s. docs/devices.md gives each
#: figure's document and table; where a datasheet prints only the 2:4-sparsity figure, the dense
#: one is half of it (tests/contract/test_devices.py holds each against the sparse figure printed).
DEVICES: tuple[Device, ...] = (
    _device("A100-40GB", ("A100-SXM-40GB", "A100-SXM4-40GB"), 40, 1555, "NVIDIA A100 datasheet",
            float64=19.5, float32=19.5, tfloat32=156, bfloat16=312, float16=312),
    _device("A100-80GB", ("A100", "A100-SXM-80GB", "A100-SXM4-80GB"), 80, 2039, "NVIDIA A100 datasheet",
            float64=19.5, float32=19.5, tfloat32=156, bfloat16=312, float16=312),
    _device("A100-80GB-PCIe", ("A100-PCIe-80GB", "A100-PCIe"), 80, 1935, "NVIDIA A100 datasheet",
            float64=19.5, float32=19.5, tfloat32=156, bfloat16=312, float16=312),
    _device("H100-SXM", ("H100", "H100-80GB", "H100-SXM-80GB", "H100-SXM5"), 80, 3350, "NVIDIA H100 datasheet",
            float64=67, float32=67, tfloat32=494.5, bfloat16=989.5, float16=989.5, float8=1979),
    _device("H100-PCIe", ("H100-PCIE-80GB",), 80, 2000, "NVIDIA H100 datasheet",
            float64=51, float32=51, tfloat32=378, bfloat16=756.5, float16=756.5, float8=1513),
    _device("H100-NVL", ("H100-NVL-94GB",), 94, 3900, "NVIDIA H100 datasheet",
            float64=60, float32=60, tfloat32=417.5, bfloat16=835.5, float16=835.5, float8=1670.5),
    _device("H200", ("H200-SXM", "H200-141GB", "H200-SXM-141GB"), 141, 4800, "NVIDIA H200 datasheet",
            float64=67, float32=67, tfloat32=494.5, bfloat16=989.5, float16=989.5, float8=1979),
    _device("H200-NVL", ("H200-NVL-141GB",), 141, 4800, "NVIDIA H200 datasheet",
            float64=60, float32=60, tfloat32=417.5, bfloat16=835.5, float16=835.5, float8=1670.5),
    _device("B200", ("B200-SXM", "HGX-B200", "B200-180GB"), 180, 7700, "NVIDIA HGX B200 specifications",
            float64=37, float32=75, tfloat32=1100, bfloat16=2250, float16=2250, float8=4500),
    _device("L4", ("L4-24GB",), 24, 300, "NVIDIA L4 datasheet",
            float32=30.3, tfloat32=60, bfloat16=121, float16=121, float8=242.5),
    _device("L40S", ("L40S-48GB",), 48, 864, "NVIDIA L40S datasheet",
            float32=91.6, tfloat32=183, bfloat16=366.5, float16=366.5, float8=733),
    _device("A10", ("A10-24GB",), 24, 600, "NVIDIA A10 datasheet",
            float32=31.2, tfloat32=62.5, bfloat16=125, float16=125),
    _device("T4", ("T4-16GB",), 16, 320, "NVIDIA T4 datasheet", float32=8.1, float16=65),
    _device("V100-16GB", ("V100-SXM2-16GB",), 16, 900, "NVIDIA V100 datasheet",
            float64=7.8, float32=15.7, float16=125),
    _device("V100-32GB", ("V100", "V100-SXM2-32GB"), 32, 900, "NVIDIA V100 datasheet",
            float64=7.8, float32=15.7, float16=125),
    _device("RTX-4090", ("GeForce-RTX-4090", "4090"), 24, 1008, "NVIDIA Ada GPU architecture whitepaper",
            float32=82.6, tfloat32=82.6, bfloat16=165.2, float16=165.2, float8=330.3),
    _device("RTX-3090", ("GeForce-RTX-3090", "3090"), 24, 936, "NVIDIA Ampere GA102 GPU architecture whitepaper",
            float32=35.6, tfloat32=35.6, bfloat16=71, float16=71),
    _device("MI300X", ("Instinct-MI300X",), 192, 5300, "AMD ROCm documentation, MI300 microarchitecture",
            float64=163.4, float32=163.4, tfloat32=653.7, bfloat16=1307.4, float16=1307.4, float8=2614.9),
    _device("MI325X", ("Instinct-MI325X",), 256, 6000, "AMD Instinct MI325X datasheet",
            float64=163.4, float32=163.4, tfloat32=653.7, bfloat16=1307.4, float16=1307.4, float8=2614.9),
    _device("MI250X", ("Instinct-MI250X",), 128, 3276.8, "AMD ROCm documentation, MI250 microarchitecture",
            float64=95.7, float32=95.7, bfloat16=383, float16=383),
)


#: ``torch`` dtype names (and aliases) -> the :data:`DTYPES` key whose peak their matmuls run at.
_DTYPE_KEYS = {"float": "float32", "double": "float64", "half": "float16", "float8_e4m3fn": "float8",
               "float8_e5m2": "float8", "float8_e4m3fnuz": "float8", "float8_e5m2fnuz": "float8"}


def dtype_key(dtype: str) -> str | None:
    """The :data:`DTYPES` key of a dtype name: ``"torch.bfloat16"`` -> ``"bfloat16"``, ``"half"`` ->
    ``"float16"``, ``"torch.float8_e4m3fn"`` -> ``"float8"``; ``None`` for a dtype with no peak in
    the table (integers, complex). ``float32`` stays ``float32``: PyTorch runs float32 matmuls
    without TF32 unless asked (``torch.backends.cuda.matmul.allow_tf32``), so ``"tfloat32"`` is
    only ever named explicitly."""
    if not isinstance(dtype, str):
        return None
    name = dtype.removeprefix("torch.")
    name = _DTYPE_KEYS.get(name, name)
    return name if name in DTYPES else None


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


_BY_KEY = {_key(alias): device for device in DEVICES for alias in (device.name, *device.aliases)}


def device_names() -> list[str]:
    """The canonical names of :data:`DEVICES`, in table order."""
    return [device.name for device in DEVICES]


def find_device(name: str) -> Device | None:
    """The device called ``name`` (canonical or alias, any case), or ``None``."""
    return _BY_KEY.get(_key(name)) if isinstance(name, str) else None


def lookup_device(name: str, *, option: str = "device") -> Device:
    """The device called ``name``.

    Raises:
        ValueError: no device has that name; the message names ``option``, the closest names and
            every canonical one.
    """
    device = find_device(name)
    if device is not None:
        return device
    close = difflib.get_close_matches(_key(str(name)), list(_BY_KEY), n=1, cutoff=0.6)
    hint = f" (did you mean {_BY_KEY[close[0]].name!r}?)" if close else ""
    raise ValueError(f"{option}: unknown device {name!r}{hint}; known devices: {', '.join(device_names())}")
