"""Task plugins: problems, rules and exact verifiers. Imports no torch and knows no agents."""

from tasks.base import (
    BaseTask,
    Episode,
    InteractiveTask,
    Message,
    Problem,
    Score,
    SingleAnswerTask,
    SupportsExpert,
    SupportsStateKey,
    Task,
    TaskConfigError,
    load_problems,
    save_problems,
    split_of,
)

__all__ = [
    "BaseTask",
    "Episode",
    "InteractiveTask",
    "Message",
    "Problem",
    "Score",
    "SingleAnswerTask",
    "SupportsExpert",
    "SupportsStateKey",
    "Task",
    "TaskConfigError",
    "load_problems",
    "save_problems",
    "split_of",
]
