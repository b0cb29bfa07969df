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
from tasks.data_files import JsonRow, JsonRows, read_json_rows

__all__ = [
    "BaseTask",
    "Episode",
    "InteractiveTask",
    "JsonRow",
    "JsonRows",
    "Message",
    "Problem",
    "Score",
    "SingleAnswerTask",
    "SupportsExpert",
    "SupportsStateKey",
    "Task",
    "TaskConfigError",
    "load_problems",
    "read_json_rows",
    "save_problems",
    "split_of",
]
