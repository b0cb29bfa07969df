"""teamtr_core.registry: the versioned ids every plugin registry parses."""

from __future__ import annotations

import pytest

from teamtr_core.errors import InvalidTaskIdError
from teamtr_core.registry import parse_id


@pytest.mark.parametrize(
    ("task_id", "parsed"),
    [
        ("teamtr/Arith-v0", ("teamtr", "Arith", 0)),
        ("Arith-v12", (None, "Arith", 12)),
        ("teamtr/ARBench-GN-v0", ("teamtr", "ARBench-GN", 0)),
        ("teamtr/Arith", ("teamtr", "Arith", None)),
    ],
)
def test_parse_id(task_id: str, parsed: tuple) -> None:
    assert parse_id(task_id) == parsed


@pytest.mark.parametrize("bad", ["", "/Arith-v0", "teamtr/", "team tr/Arith-v0", "a/b/c-v0"])
def test_malformed_ids(bad: str) -> None:
    with pytest.raises(InvalidTaskIdError, match="namespace/Name-vN"):
        parse_id(bad)
