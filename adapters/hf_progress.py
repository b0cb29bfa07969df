"""transformers' own progress bars ("Loading weights", "Writing model shards") turned off for a
block of code and restored after it, so that a run with its progress off (``progress: false``,
``train(progress=False)``) prints nothing of its own accord while it loads and saves models."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

__all__ = ["transformers_progress"]


@contextlib.contextmanager
def transformers_progress(enabled: bool) -> Iterator[None]:
    """With ``enabled`` false, transformers' and huggingface_hub's progress bars are off inside
    the block, and as they were after it (a user's own setting is kept). With ``enabled`` true,
    or without transformers installed, nothing changes.

    Example::

        with transformers_progress(config.progress):
            policy = HFPolicy.from_pretrained(path)  # no "Loading weights" bar when off
    """
    if enabled or importlib.util.find_spec("transformers") is None:
        yield
        return
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    hub_was_off = hub_utils.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # both libraries' bars (transformers turns off the hub's)
    try:
        yield
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
        if hub_was_off:
            hub_utils.disable_progress_bars()
        else:
            hub_utils.enable_progress_bars()
