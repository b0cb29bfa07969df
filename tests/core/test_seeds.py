"""teamtr_core.seeds: the seed derivation and its named streams, pinned (a changed number here
changes every run's draws)."""

from __future__ import annotations

from teamtr_core import seeds
from teamtr_core.seeds import (
    CALL_STREAM,
    EVAL_STREAM,
    SHARD_STREAM,
    TRAIN_STREAM,
    derive_seed,
)


def test_derive_seed_is_pinned() -> None:
    assert derive_seed(0, TRAIN_STREAM, 0, 0) == 2807452510
    assert derive_seed(7, EVAL_STREAM) == 3898847710
    assert derive_seed(3, SHARD_STREAM, 1) == 2995803598
    assert derive_seed(-5, 2, 1, CALL_STREAM) == 745634148  # signs are dropped
    assert derive_seed(5, 2, 1, CALL_STREAM) == 745634148


def test_every_stream_has_its_own_number() -> None:
    streams = {k: v for k, v in vars(seeds).items() if k.endswith("_STREAM")}
    assert streams == {
        "ORDER_STREAM": 11,
        "TRAIN_STREAM": 13,
        "DIAG_STREAM": 17,
        "PROBLEM_STREAM": 19,
        "PROBE_STREAM": 23,
        "EVAL_STREAM": 999_983,
        "SFT_STREAM": 1_031,
        "INIT_STREAM": 1_033,
        "CALL_STREAM": 7_919,
        "GANG_STREAM": 104_723,
        "SHARD_STREAM": 104_729,
    }
    assert len(set(streams.values())) == len(streams)
