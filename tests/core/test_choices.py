"""Literal choices are read from the type: written once, checked everywhere."""

from __future__ import annotations

from typing import Literal

import pytest

from teamtr_core.choices import choice_errors, choices, one_of
from teamtr_env.protocol import TeamProtocol, Visibility
from trainers.optim.sft import SFTConfig

Mode = Literal["keep", "strip"]


def test_choices_come_from_the_literal_and_optional_literals() -> None:
    assert choices(Mode) == ("keep", "strip")
    assert choices(Literal["a", "b"] | None) == ("a", "b", None)
    assert one_of(Mode) == "'keep' or 'strip'"
    assert one_of(Literal["a", "b", "c"]) == "'a', 'b' or 'c'"
    assert choice_errors("mode", "keep", Mode) == []
    assert choice_errors("mode", "hide", Mode) == ["mode: expected 'keep' or 'strip', got 'hide'"]
    with pytest.raises(TypeError):
        choices(str)


def test_a_choice_added_to_a_literal_is_accepted_without_another_edit() -> None:
    # The protocol's visibility check reads the Literal: every value it lists is valid.
    for value in choices(Visibility):
        TeamProtocol(agents=("a", "b"), visibility=value)
    with pytest.raises(ValueError, match="visibility: expected 'all', 'own', 'rounds' or"):
        TeamProtocol(agents=("a", "b"), visibility="nobody")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr_schedule: expected 'constant' or 'cosine'"):
        SFTConfig(lr_schedule="linear")  # type: ignore[arg-type]
