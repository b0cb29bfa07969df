"""A safetensors file written one tensor at a time (:func:`write_safetensors`): its header is
made from the tensors' names, shapes and dtypes alone, so the tensors themselves can arrive one
by one (a sharded agent gathers each whole only when it is written) and the writer never holds
more than one. The file is what ``safetensors.torch.load_file`` reads (a test checks it)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SAFETENSORS_DTYPES", "TensorSpec", "write_safetensors"]

SAFETENSORS_DTYPES = {
    "torch.float64": "F64",
    "torch.float32": "F32",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.int64": "I64",
    "torch.int32": "I32",
    "torch.int16": "I16",
    "torch.int8": "I8",
    "torch.uint8": "U8",
    "torch.bool": "BOOL",
}
"""safetensors' name of each torch dtype a model's state holds."""

TensorSpec = tuple[str, Sequence[int], Any]
"""A tensor's name, shape and torch dtype."""


def write_safetensors(path: str | Path, specs: Sequence[TensorSpec], tensors: Iterable[Any]) -> int:
    """Writes ``tensors`` (in the order of ``specs``, each with the spec's shape and dtype) to
    ``path`` as a safetensors file, one at a time; returns the data's bytes.

    Raises:
        ValueError: a tensor whose shape or dtype is not its spec's, or too few tensors.
    """
    header: dict[str, Any] = {}
    offset = 0
    for name, shape, dtype in specs:
        size = _numel(shape) * _itemsize(dtype)
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[str(dtype)],
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    written = 0
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        items = iter(tensors)
        for name, shape, dtype in specs:
            tensor = next(items, None)
            if tensor is None:
                raise ValueError(f"no tensor for {name!r}: fewer tensors than specs")
            if tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
                raise ValueError(
                    f"{name!r}: expected {tuple(shape)} {dtype}, got {tuple(tensor.shape)} "
                    f"{tensor.dtype}"
                )
            data = tensor.detach().to("cpu").contiguous().view(-1).view(_byte_dtype()).numpy()
            fh.write(data.tobytes())
            written += data.size
    return written


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _itemsize(dtype: Any) -> int:
    import torch

    return int(torch.empty((), dtype=dtype).element_size())


def _byte_dtype() -> Any:
    import torch

    return torch.uint8
