"""The Policy protocol and its types, re-exported from the shared floor
(:mod:`teamtr_core.policy`) so that ``from adapters.base import Policy`` keeps working."""

from teamtr_core.policy import (
    Completion,
    Generation,
    LoraSettings,
    Policy,
    PrivilegedPolicy,
    SamplingParams,
    TokenLogprobs,
    TrainablePolicy,
)

__all__ = [
    "Completion",
    "Generation",
    "LoraSettings",
    "Policy",
    "PrivilegedPolicy",
    "SamplingParams",
    "TokenLogprobs",
    "TrainablePolicy",
]
