"""``teamtr/ToolUse-v0``: a tau-bench-style retail customer-support domain.

The team calls tools on a per-episode JSON database and talks to a simulated user; the reward is
tau-bench's (final database == gold database, and every required output said to the user).

Pure rules live apart from the plugin: :mod:`~tasks.tooluse.db` (tables, copying, canonical
hashing), :mod:`~tasks.tooluse.toolbox` and :mod:`~tasks.tooluse.tools` (schemas, validation,
atomic execution), :mod:`~tasks.tooluse.actions` (message -> tool call or message to the user),
:mod:`~tasks.tooluse.reward`, :mod:`~tasks.tooluse.tasks_data` (task records and tau-bench
loaders), :mod:`~tasks.tooluse.user_sim` and :mod:`~tasks.tooluse.expert`.
"""

from tasks.tooluse.db import canonical_hash, copy_db, load_db
from tasks.tooluse.task import ToolUseTask
from tasks.tooluse.tasks_data import Action, ToolTask, UnsupportedToolsWarning, load_task_file
from tasks.tooluse.tools import make_toolbox, tool_schemas
from tasks.tooluse.user_sim import STOP, PolicyUser, ScriptedUser, UserSimulator

__all__ = [
    "STOP",
    "Action",
    "PolicyUser",
    "ScriptedUser",
    "ToolTask",
    "ToolUseTask",
    "UnsupportedToolsWarning",
    "UserSimulator",
    "canonical_hash",
    "copy_db",
    "load_db",
    "load_task_file",
    "make_toolbox",
    "tool_schemas",
]
