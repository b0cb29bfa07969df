"""The ``teamtr/ToolUse-v0`` task plugin: a tau-bench-style retail customer-support domain.

The team plays the store's support agent: it calls tools on a per-episode copy of the store's
database and talks to a simulated user. Reward (tau-bench): 1 iff the final database equals the
one the gold actions produce and every required output was said to the user.
"""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tasks.base import (
    SPLITS,
    Episode,
    InteractiveTask,
    Problem,
    Score,
    Split,
    TaskConfigError,
    is_int,
)
from tasks.tooluse import expert as expert_rules
from tasks.tooluse.actions import MAX_SCAN_CHARS, parse_agent_message, render_feedback
from tasks.tooluse.db import (
    Database,
    DatabaseError,
    canonical_hash,
    canonical_json,
    copy_db,
    load_db,
)
from tasks.tooluse.reward import GoldState, outputs_found, replay_gold
from tasks.tooluse.tasks_data import ToolTask, builtin_tasks, load_task_file
from tasks.tooluse.tools import RESPOND_MAX_CHARS, RESPOND_SCHEMA, TOOLS, make_toolbox, tool_schemas
from tasks.tooluse.user_sim import MAX_USER_CHARS, STOP, ScriptedUser, Turn, UserSimulator
from teamtr_core.choices import choice_errors
from teamtr_core.toolcalls import ToolCall

ToolListing = Literal["compact", "json"]
Unsupported = Literal["skip", "error"]


class UnknownUsersWarning(UserWarning):
    """Loaded tasks name users that the task's database does not have."""


CALL_FORMAT = """To call a tool, write exactly one call in your message, for example:
<tool_call>{"arguments": {"order_id": "#W0000000"}, "name": "get_order_details"}</tool_call>
The result comes back as "Tool <name> returned: ..." (or "Tool <name> failed: Error: ...").
Only the first call of a message runs, and text around a call is not shown to the user.
A message without a tool call goes to the user, whose answer comes back as "User: ...".
The conversation ends when the user is done or when you transfer them to a human agent."""


@dataclass
class EpisodeState:
    """One episode: the task, its private database copy and what happened so far."""

    task: ToolTask
    db: Database
    rng: np.random.Generator
    conversation: list[Turn] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # the team's messages to the user
    tool_calls: int = 0
    tool_errors: int = 0
    invalid_calls: int = 0
    ignored_calls: int = 0
    done: bool = False
    end_reason: str | None = None  # "user_stop" or "transfer"
    # per agent: whether each of its messages was a valid action (ToolUseTask.local_rewards)
    valid_actions: dict[str, list[bool]] = field(default_factory=dict)


class ToolUseTask(InteractiveTask):
    """Retail customer support with tools and a simulated user (tau-bench's retail mechanics).

    Args:
        db_dir: a folder with ``users.json``, ``products.json`` and ``orders.json`` (e.g.
            tau-bench's ``tau_bench/envs/retail/data``); default: the shipped store.
        task_file: the tasks ``sample`` draws from (any format :meth:`load` reads); default:
            the 12 shipped tasks. Needed with ``db_dir``, whose users the shipped tasks lack.
        user_sim: ``"scripted"`` (offline, rule-based) or any
            :class:`~tasks.tooluse.user_sim.UserSimulator` (e.g. ``PolicyUser(policy)``).
        tool_listing: how the prompt lists the tools: ``"compact"`` signatures or the full
            ``"json"`` schemas.
        max_call_chars: tool calls with more characters of arguments are rejected.
        unsupported: tasks of a file whose gold actions use tools this domain lacks are
            ``"skip"``-ped with a warning, or an ``"error"``.
        split: the split of loaded and shipped tasks (default ``"test"``; project JSONL keeps
            its own).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "tooluse"
    description = "tau-bench-style retail support: tools on a JSON database + a simulated user."

    def __init__(
        self,
        db_dir: str | None = None,
        task_file: str | None = None,
        user_sim: Any = "scripted",
        tool_listing: ToolListing = "compact",
        max_call_chars: int = 8192,
        unsupported: Unsupported = "skip",
        split: str | None = None,
    ) -> None:
        errors: list[str] = []
        errors += choice_errors("tool_listing", tool_listing, ToolListing)
        if not is_int(max_call_chars) or not 256 <= max_call_chars <= 1_000_000:
            errors.append(
                f"max_call_chars must be an integer in 256..1000000, got {max_call_chars!r}"
            )
        errors += choice_errors("unsupported", unsupported, Unsupported)
        if split is not None and split not in SPLITS:
            errors.append(f"split must be one of {SPLITS} or None, got {split!r}")
        db: Database = {}
        try:
            db = load_db(db_dir)
        except (DatabaseError, OSError) as exc:
            errors.append(f"db_dir: {exc}")
        if not (user_sim == "scripted" or isinstance(user_sim, UserSimulator)):
            errors.append(
                "user_sim must be 'scripted' or an object with opening(task) and "
                f"reply(task, conversation, rng), got {user_sim!r:.80}"
            )
        if errors:
            raise TaskConfigError("ToolUseTask", errors)
        self.db = db
        self.split: Split | None = split  # type: ignore[assignment]
        self.unsupported = unsupported
        self.tool_listing = tool_listing
        self._tool_text = self._listing()
        self.toolbox = make_toolbox(max_call_chars)
        self.user_sim: UserSimulator = (
            ScriptedUser(db["users"]) if user_sim == "scripted" else user_sim
        )
        self._gold_cache: OrderedDict[tuple[str, str], GoldState] = OrderedDict()
        self._policy_text = (
            resources.files("tasks.tooluse").joinpath("policy.md").read_text(encoding="utf-8")
        )
        try:
            self._pool = self._initial_pool(task_file, db_dir)
        except TaskConfigError:
            raise
        except (ValueError, OSError) as exc:
            raise TaskConfigError("ToolUseTask", [f"task_file: {exc}"]) from exc

    def _initial_pool(self, task_file: str | None, db_dir: str | None) -> list[Problem]:
        if task_file is not None:
            return self.load(task_file)
        pool = [t.to_problem(self.split or "test", "builtin") for t in builtin_tasks()]
        missing = sorted({p.data["user_id"] for p in pool} - set(self.db["users"]))
        if db_dir is not None and missing:
            raise TaskConfigError(
                "ToolUseTask",
                [
                    f"db_dir: the shipped tasks refer to users missing from {db_dir} "
                    f"({missing[:3]} ...): pass the task file that goes with this database, "
                    "e.g. task_file=.../tasks_test.py"
                ],
            )
        return pool

    # -- problems -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Problem:
        """One task of the pool (the shipped tasks, or ``task_file``), uniformly."""
        return self._pool[int(rng.integers(len(self._pool)))]

    def problem_pool(self) -> list[Problem]:
        """Every task ``sample`` draws from (the shipped tasks, or ``task_file``), in order."""
        return list(self._pool)

    def load(self, path: str | Path) -> list[Problem]:
        """tau-bench task files (JSON list, JSONL, Python ``Task(...)`` module) or the project's
        JSONL; see :func:`tasks.tooluse.tasks_data.load_task_file`. Warns when tasks name users
        that the database lacks (a task file used without its ``db_dir``)."""
        problems = load_task_file(
            path,
            split=self.split or "test",
            unsupported=self.unsupported,
        )
        strangers = [p.id for p in problems if p.data.get("user_id") not in self.db["users"]]
        if strangers:
            warnings.warn(
                f"{path}: {len(strangers)} of {len(problems)} task(s) name users missing from the "
                f"database (e.g. {strangers[0]}); these tasks cannot be solved. Pass the "
                "database they were written for with db_dir=... (-o db_dir=... on the CLI).",
                UnknownUsersWarning,
                stacklevel=2,
            )
        return problems

    def tools(self) -> list[dict[str, Any]]:
        """The tool schemas (tau-bench / OpenAI function format), e.g. for a chat template."""
        return tool_schemas()

    def prompt(self, problem: Problem) -> str:
        task = ToolTask.from_problem(problem)
        text = (
            f"{self._policy_text.rstrip()}\n\n## Tools\n\n{CALL_FORMAT}\n\n{self._tool_text}\n\n"
            f"## Conversation\n\nUser: {self.user_sim.opening(task)}"
        )
        return text

    def _listing(self) -> str:
        if self.tool_listing == "json":
            return "\n".join(json.dumps(schema) for schema in tool_schemas())
        lines = []
        for schema in [tool.schema() for tool in TOOLS] + [RESPOND_SCHEMA]:
            function = schema["function"]
            props = function["parameters"]["properties"]
            args = ", ".join(f"{name}: {_type_of(spec)}" for name, spec in props.items())
            lines.append(f"- {function['name']}({args}): {function['description']}")
        return "\n".join(lines)

    # -- the episode --------------------------------------------------------------------------
    def start(self, problem: Problem, rng: np.random.Generator) -> EpisodeState:
        task = ToolTask.from_problem(problem)
        state = EpisodeState(task, copy_db(self.db), np.random.default_rng(rng.integers(2**63)))
        state.conversation.append(Turn("user", self.user_sim.opening(task)))
        return state

    def respond(self, state: EpisodeState, speaker: str, text: str) -> str | None:
        """Runs a tool call or passes a message to the user (see :mod:`tasks.tooluse.actions`)."""
        if state.done:
            return None
        action = parse_agent_message(text, MAX_SCAN_CHARS)
        note = ""
        if action.ignored_calls:
            state.ignored_calls += action.ignored_calls
            note = f"\n(Only the first tool call of a message runs; {action.ignored_calls} more ignored.)"
        valid = state.valid_actions.setdefault(speaker, [])
        if action.kind == "invalid":
            state.invalid_calls += 1
            valid.append(False)
            return render_feedback("invalid", action.text)
        if action.kind == "tool" and action.name is not None:
            state.tool_calls += 1
            outcome = self.toolbox.execute(state.db, action.name, action.arguments)
            valid.append(outcome.outcome not in ("invalid", "unknown_tool"))
            if not valid[-1]:
                state.invalid_calls += 1
                return render_feedback("invalid", outcome.text) + note
            if not outcome.ok:
                state.tool_errors += 1
                return render_feedback("failed", outcome.text, outcome.name) + note
            if outcome.terminal:
                state.done, state.end_reason = True, "transfer"
            return render_feedback("ok", outcome.text, outcome.name) + note
        valid.append(True)
        message = action.text[:RESPOND_MAX_CHARS]
        state.said.append(message)
        state.conversation.append(Turn("agent", message))
        reply = str(self.user_sim.reply(state.task, state.conversation, state.rng))[:MAX_USER_CHARS]
        state.conversation.append(Turn("user", reply))
        if STOP in reply:
            state.done, state.end_reason = True, "user_stop"
        return render_feedback("user", reply) + note

    def done(self, state: EpisodeState) -> bool:
        return state.done

    def gold(self, problem: Problem) -> GoldState:
        """The database state the gold actions lead to (cached per problem)."""
        task = ToolTask.from_problem(problem)
        key = (problem.id, canonical_json([a.to_dict() for a in task.actions]))
        if key not in self._gold_cache:
            self._gold_cache[key] = replay_gold(self.db, task.actions, self.toolbox)
            while len(self._gold_cache) > 4096:
                self._gold_cache.popitem(last=False)
        return self._gold_cache[key]

    def score(self, episode: Episode) -> Score:
        """tau-bench's reward; reaching the turn limit first scores 0 (``reason="turn_limit"``)."""
        state = episode.state
        if not isinstance(state, EpisodeState):
            return Score(0.0, False, None, {"reason": "no_episode_state"})
        gold = self.gold(episode.problem)
        final_hash = canonical_hash(state.db)
        db_match = final_hash == gold.hash
        found = outputs_found(state.task.outputs, state.said)
        if not state.done:
            reason = "turn_limit"
        elif not db_match:
            reason = "db_mismatch"
        elif not all(found.values()):
            reason = "missing_outputs"
        else:
            reason = "correct"
        details = {
            "reason": reason,
            "db_match": db_match,
            "outputs_found": found,
            "invalid_calls": state.invalid_calls,
            "tool_calls": state.tool_calls,
            "tool_errors": state.tool_errors,
            "ignored_calls": state.ignored_calls,
            "messages_to_user": len(state.said),
            "end_reason": state.end_reason or "turn_limit",
            "gold_errors": list(gold.errors),
        }
        correct = reason == "correct"
        return Score(float(correct), correct, final_hash[:16], details)

    def local_rewards(self, episode: Episode) -> Mapping[str, float]:
        """Each agent's share of its messages that were valid actions: a tool call the tools
        accepted (a known tool with arguments that fit its schema; it may still fail on the
        data, e.g. an order that does not exist) or a message to the user. A malformed call, an
        unknown tool or arguments that do not fit score 0. It rewards speaking the protocol,
        not progress: mix it with the team reward (``reward: {team: 1, local: 0.2}``)."""
        state = episode.state
        if not isinstance(state, EpisodeState):
            return {}
        return {agent: sum(v) / len(v) for agent, v in state.valid_actions.items() if v}

    # -- the scripted expert ------------------------------------------------------------------
    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Plays the gold actions of ``problem`` (privileged), see :mod:`tasks.tooluse.expert`;
        without the problem it can only ask who the user is."""
        if problem is None:
            return "Could you please tell me your email address?"
        task = ToolTask.from_problem(problem)
        prompt = self.prompt(problem)
        start = context.find(prompt)
        tail = context[start + len(prompt) :] if start >= 0 else ""
        failures = frozenset(
            ToolCall(task.actions[i].name, dict(task.actions[i].kwargs)).to_json()
            for i in self.gold(problem).failed
        )
        view = expert_rules.read_conversation(
            tail, self.name, self.user_sim.opening(task), failures
        )
        return expert_rules.expert_reply(task, view, self.db, rng, make_error=make_error)


def _type_of(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    if spec.get("type") == "array":
        return f"list of {spec.get('items', {}).get('type', 'value')}"
    return str(spec.get("type", "value"))
