"""The ``reasoning_gym/<dataset>-v0`` tasks: every reasoning-gym dataset as a team task.

reasoning-gym is an optional dependency (``pip install -e '.[reasoning-gym]'``), imported only
when one of these tasks is made; the ids are listed from a static catalogue
(:mod:`tasks.reasoning_gym.catalogue`).
"""

from tasks.reasoning_gym.catalogue import CATALOGUE, REASONING_GYM_VERSION
from tasks.reasoning_gym.task import (
    ReasoningGymExpertTask,
    ReasoningGymTask,
    extract_answer,
    make_task,
)

__all__ = [
    "CATALOGUE",
    "REASONING_GYM_VERSION",
    "ReasoningGymExpertTask",
    "ReasoningGymTask",
    "extract_answer",
    "make_task",
]
