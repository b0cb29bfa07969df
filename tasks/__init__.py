"""Task plugins: problems, rules and exact verifiers. Imports no torch and knows no agents."""

from tasks.base import (
    PROMPT_INDEX,
    BaseTask,
    Episode,
    InteractiveTask,
    Message,
    Problem,
    PromptIndex,
    Score,
    SingleAnswerTask,
    SupportsExpert,
    Task,
    TaskConfigError,
    load_problems,
    save_problems,
    split_of,
)

__all__ = [
    "PROMPT_INDEX",
    "BaseTask",
    "Episode",
    "InteractiveTask",
    "Message",
    "Problem",
    "PromptIndex",
    "Score",
    "SingleAnswerTask",
    "SupportsExpert",
    "Task",
    "TaskConfigError",
    "load_problems",
    "save_problems",
    "split_of",
]
