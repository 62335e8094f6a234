"""How the shipped drafts' weights are stored: float16 safetensors, or int8 with one scale per row.

`assets/draft/` holds at most 25 MB, and the previous drafts stay selectable beside the
default. The older ones are therefore kept as int8 matrices with a float32 scale per output
row (symmetric: w ~ q * scale, |error| <= scale / 2), half the bytes of float16. A draft's
weights only shape its proposals; the verifiers stay exact whatever the draft, so storing
it coarser can cost acceptance but never correctness. Vectors (norm weights) stay float16.

    python -m spectr_gbv.models.weight_store FILE.safetensors --int8   (rewrites FILE in place)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

SCALE_SUFFIX = ".int8_row_scale"  # key of the scales of the int8 matrix stored under the key before it


def int8_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix [rows, ...] -> (int8 values, float32 scale per row)."""
    flat = weight.detach().float().reshape(weight.shape[0], -1)
    scale = (flat.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
    values = torch.round(flat / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return values.reshape(weight.shape), scale


def save(tensors: dict[str, torch.Tensor], path: Path, int8: bool = False, dtype: torch.dtype = torch.float16) -> None:
    """Write `tensors` in `dtype`, or with every matrix as int8 rows (`int8`), atomically."""
    from safetensors.torch import save_file

    stored = {}
    for name, value in tensors.items():
        if int8 and value.is_floating_point() and value.dim() >= 2:
            stored[name], stored[name + SCALE_SUFFIX] = int8_rows(value)
        else:
            stored[name] = value.detach().to(dtype) if value.is_floating_point() else value.detach()
    stored = {k: v.contiguous().clone() for k, v in stored.items()}
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    save_file(stored, str(partial), metadata={"format": "pt", "storage": "int8-rows" if int8 else str(dtype).removeprefix("torch.")})
    os.replace(partial, path)


def load(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a file written by `save` (or any safetensors file), int8 rows dequantised to float32."""
    from safetensors.torch import load_file

    raw = load_file(str(path))
    tensors = {}
    for name, value in raw.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = raw.get(name + SCALE_SUFFIX)
        if scale is not None:
            shape = value.shape
            value = (value.reshape(shape[0], -1).float() * scale[:, None]).reshape(shape)
        tensors[name] = value
    return tensors


def is_int8(path: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return (f.metadata() or {}).get("storage") == "int8-rows"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--int8", action="store_true", help="store the matrices as int8 rows (else float16)")
    args = parser.parse_args()
    before = args.file.stat().st_size
    save(load(args.file), args.file, int8=args.int8)
    print(f"{args.file}: {before / 2**20:.1f} MB -> {args.file.stat().st_size / 2**20:.1f} MB")


if __name__ == "__main__":
    main()
