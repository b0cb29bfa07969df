"""A safetensors file written one tensor at a time (adapters.weight_stream): what
safetensors reads back, with each tensor consumed only as it is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adapters.weight_stream import write_safetensors


def test_the_file_is_what_safetensors_reads_and_tensors_are_taken_one_at_a_time(
    tmp_path: Path,
) -> None:
    tensors = {
        "a.weight": torch.randn(3, 4),
        "b": torch.randn(5).to(torch.bfloat16),
        "c": torch.arange(6).view(2, 3),
        "d": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
    }
    specs = [(name, tuple(t.shape), t.dtype) for name, t in tensors.items()]
    taken: list[str] = []

    def lazily():  # type: ignore[no-untyped-def]
        for name, tensor in tensors.items():
            taken.append(name)
            yield tensor

    path = tmp_path / "w.safetensors"
    nbytes = write_safetensors(path, specs, lazily())
    assert taken == list(tensors)
    assert nbytes == sum(t.numel() * t.element_size() for t in tensors.values())
    back = load_file(path)
    assert back.keys() == tensors.keys()
    assert all(torch.equal(back[k], v) for k, v in tensors.items())


def test_a_tensor_that_is_not_its_spec_is_refused(tmp_path: Path) -> None:
    specs = [("a", (2,), torch.float32), ("b", (3,), torch.float32)]
    with pytest.raises(ValueError, match=r"'b': expected \(3,\) torch.float32"):
        write_safetensors(tmp_path / "w", specs, iter([torch.zeros(2), torch.zeros(4)]))
    with pytest.raises(ValueError, match="fewer tensors than specs"):
        write_safetensors(tmp_path / "w", specs, iter([torch.zeros(2)]))
