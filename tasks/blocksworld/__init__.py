"""``teamtr/Blocksworld-v0``: PlanBench Blocksworld plan generation (and optimality), with uniform
random instances, PlanBench's prompt and plan extraction, and a STRIPS validator.

Pure rules live apart from the plugin: :mod:`~tasks.blocksworld.domain` (STRIPS, validation,
optimal search), :mod:`~tasks.blocksworld.states` (uniform random states),
:mod:`~tasks.blocksworld.text` (PlanBench rendering and extraction), :mod:`~tasks.blocksworld.pddl`
(PlanBench's PDDL files) and :mod:`~tasks.blocksworld.problems` (problem rows and loaders).
"""

from tasks.blocksworld.domain import Action, Instance, PlanCheck, optimal_plan, simulate
from tasks.blocksworld.states import count_states, sample_state
from tasks.blocksworld.task import BlocksworldTask
from tasks.blocksworld.text import extract_plan, render_prompt

__all__ = [
    "Action",
    "BlocksworldTask",
    "Instance",
    "PlanCheck",
    "count_states",
    "extract_plan",
    "optimal_plan",
    "render_prompt",
    "sample_state",
    "simulate",
]
