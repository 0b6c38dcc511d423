"""Where a local model runs: the torch device chosen by the caller, `$SQLENV_DEVICE`, or `auto`
(a GPU where PyTorch sees one, else the CPU); and whether that hardware computes in bfloat16."""

from __future__ import annotations

from sqlenv.settings import DEVICE_ENV, device_from_environment

__all__ = ["DEVICE_ENV", "native_bf16", "resolve_device"]


def resolve_device(requested: str | None = None) -> str:
    """The torch device a model runs on: `requested`, else $SQLENV_DEVICE, else `auto` (a GPU
    where PyTorch sees one, else the CPU). Asking for a device PyTorch cannot use is an error."""
    import torch

    choice = (requested or device_from_environment() or "auto").strip().lower()
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(choice)
    except RuntimeError:
        raise ValueError(f"unknown device {choice!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {choice!r} asked for, but PyTorch sees no CUDA GPU here")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {choice!r} asked for, but PyTorch sees {torch.cuda.device_count()} GPU(s)")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {choice!r} is not supported: use auto, cpu, cuda or cuda:N")
    return str(device)


def native_bf16(device: str | None = None) -> tuple[bool, str]:
    """Whether the device models train and run on computes in bfloat16 natively.

    Args:
        device: a torch device (`cpu`, `cuda`, `cuda:N`); None: a GPU where PyTorch sees one,
            else the CPU.

    Returns:
        (True for a GPU that supports bfloat16 or a CPU with AVX-512 BF16 or AMX, a description
        of the device). Elsewhere PyTorch emulates bfloat16, many times slower than float32.
    """
    import torch

    on_gpu = torch.cuda.is_available() if device is None else device.startswith("cuda")
    if on_gpu:
        return torch.cuda.is_bf16_supported(), f"GPU {torch.cuda.get_device_name()}"
    # Private but long-standing helpers (torch.cpu); absent ones count as no support.
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    native = any(getattr(torch.cpu, name, lambda: False)() for name in checks)
    return native, f"CPU with {torch.backends.cpu.get_cpu_capability()}"
