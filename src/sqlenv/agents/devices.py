"""Where a local model runs: the torch device chosen by the caller, `$SQLENV_DEVICE`, or `auto`
(a GPU where PyTorch sees one, else the CPU)."""

from __future__ import annotations

from sqlenv.settings import DEVICE_ENV, device_from_environment

__all__ = ["DEVICE_ENV", "resolve_device"]


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
