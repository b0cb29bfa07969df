"""Tasks from a local dataset and TRL-style reward functions.

A task is registered from a data file and reward functions, with no class to write::

    import teamtr_env
    from tasks.dataset import DatasetTask

    teamtr_env.register(
        "mylab/Capitals-v0",
        DatasetTask,
        kwargs={
            "path": "capitals.jsonl",
            "prompt_column": "question",
            "reward_funcs": ["tasks.dataset.rewards:exact_match"],  # or Python callables
        },
    )
    env = teamtr_env.make("mylab/Capitals-v0")

See ``docs/tasks/dataset.md`` for the reward-function convention, splits and options.
"""

from tasks.dataset.rewards import RewardFunc, exact_match
from tasks.dataset.task import DatasetTask

__all__ = ["DatasetTask", "RewardFunc", "exact_match"]
