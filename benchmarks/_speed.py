"""What the update-speed benchmarks share (``benchmarks/update_speed.py`` and its CoMLRL arm,
``benchmarks/peer_comlrl.py``, which imports nothing of the script that runs it): the task, the
batch of CoMLRL's section, the sampling and the learning rate, and the clock of ``generate``."""

from __future__ import annotations

import time
from typing import Any

TASK = "teamtr/Arith-v0"
COMLRL_PROMPTS, COMLRL_GENERATIONS = 16, 4  # CoMLRL's section: prompts and generations per step
NEW_TOKENS, TEMPERATURE, LR = 12, 0.8, 1e-4


class GenerateClock:
    """Seconds spent in the wrapped models' ``generate`` and the completion tokens produced.

    A completion's tokens are those after the prompt up to and including the first
    end-of-sequence token (all ``max_new_tokens`` of them when it never stops); the padding that
    ``generate`` puts after a finished row is not counted.
    """

    def __init__(self, eos_id: int) -> None:
        self.eos_id = eos_id
        self.seconds = 0.0
        self.tokens = 0
        self.calls = 0
        self._wrapped: list[Any] = []

    def wrap(self, model: Any) -> None:
        original = model.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            import torch

            t0 = time.perf_counter()
            out = original(*args, **kwargs)
            self.seconds += time.perf_counter() - t0
            sequences = out.sequences if hasattr(out, "sequences") else out
            inputs = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
            new = sequences[:, inputs.shape[1] :]
            ended = new == self.eos_id
            lengths = torch.where(
                ended.any(dim=1), ended.int().argmax(dim=1) + 1, torch.tensor(new.shape[1])
            )
            self.tokens += int(lengths.sum())
            self.calls += 1
            return out

        model.generate = generate  # an instance attribute shadows the class's method
        self._wrapped.append(model)

    def unwrap(self) -> None:
        for model in self._wrapped:
            del model.__dict__["generate"]
        self._wrapped.clear()
