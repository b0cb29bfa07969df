"""Behaviour cloning: the supervised warm start of the team trainers.

A scripted expert plays the team's episodes (:func:`collect_expert_data`); every agent then learns
to write its expert messages in the very contexts it will see at rollout time
(:func:`behaviour_clone`): the mean per-token negative log-likelihood of each message, its EOS token
included so that the model learns to stop, is minimised with AdamW on random minibatches.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from adapters.rollout_engine import mark_updated
from adapters.scripted import ScriptedExpert
from tasks.base import Task
from teamtr_core.policy import Completion, SamplingParams, TrainablePolicy
from teamtr_core.seeds import SFT_STREAM, derive_seed
from teamtr_env.env import TeamEnv
from teamtr_env.runners import Runner
from trainers.config.sft import SFTConfig

_log = logging.getLogger(__name__)
_EVAL_EVERY = 10  # optimizer steps between held-out checks when target_accuracy is set
_HOLDOUT = 64  # held-out messages per agent (at most a fifth of its data)


def collect_expert_data(
    env_fn: Callable[[], TeamEnv],
    task: Task,
    agents: Sequence[str],
    n_problems: int,
    *,
    error_rate: float,
    seed: int,
) -> dict[str, list[tuple[str, str]]]:
    """Plays ``n_problems`` episodes (group size 1) with ``ScriptedExpert(task, error_rate)`` as
    every agent through the project's :class:`Runner`.

    Returns:
        For each of ``agents``, the ``(context, text)`` of every message it wrote, in episode
        order; the contexts are exactly the prompts the agent's policy gets at rollout time.

    Raises:
        ValueError: ``agents`` names someone who is not on the environment's team.
    """
    expert = ScriptedExpert(task, error_rate)
    runner = Runner(env_fn, expert, SamplingParams(), progress=False, description="expert")
    unknown = [a for a in agents if a not in runner.agents]
    if unknown:
        raise ValueError(f"agents {unknown} are not on this team {runner.agents}")
    batch = runner.rollout(runner.sample_problems(n_problems, seed=seed, distinct=False), seed=seed)
    return {a: [(m.context, m.text) for m in batch.messages_of(a)] for a in agents}


def _completion(policy: TrainablePolicy, text: str) -> Completion:
    """``text`` as token ids with the EOS appended when the policy has a codec, else the text."""
    codec: Any = getattr(policy, "codec", None)
    if codec is None:
        return text
    eos = [codec.eos_id] if codec.eos_id is not None else []
    return [*codec.completion_ids(text), *eos]


def _message_logprobs(
    policy: TrainablePolicy, contexts: Sequence[str], completions: Sequence[Completion]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed log-probs ``[B]`` and token counts ``[B]`` of the completions."""
    scored = policy.logprobs(list(contexts), list(completions))
    mask = scored.mask.to(scored.logprobs.dtype)
    return (scored.logprobs * mask).sum(-1), mask.sum(-1)


def behaviour_clone(
    policies: Mapping[str, TrainablePolicy],
    data: Mapping[str, Sequence[tuple[str, str]]],
    config: SFTConfig,
    *,
    progress: bool = False,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, list[float]]:
    """Trains every agent of ``data`` to imitate its expert messages.

    Each step updates every agent once (in the order of ``policies``) on ``config.batch_size``
    random messages of its data: AdamW on the mean per-token NLL (EOS included), gradients clipped
    to ``config.max_grad_norm``, the learning rate constant or decayed along a cosine from
    ``config.lr`` to 0 (``config.lr_schedule``). Minibatches come from a ``torch.Generator`` seeded with
    ``config.seed`` and the agent's index, so a seed gives the same curves.

    With ``config.target_accuracy``, up to 64 messages per agent are held out and every 10 steps
    the held-out match (mean probability of writing the expert message exactly at temperature 1)
    is measured per agent; training stops once the product over agents reaches the target.

    Args:
        policies: ``agent -> policy``; each agent of ``data`` needs one.
        data: ``agent -> [(context, expert text)]`` (see :func:`collect_expert_data`).
        config: the settings.
        progress: show a rich progress bar.
        on_step: called after every step with the step index and the metrics
            ``sft/lr`` and ``agent/<name>/sft_nll`` (and, at held-out checks, ``agent/<name>/sft_heldout_match``
            and ``sft/heldout_team_match``), ready for a ``MetricsLogger``.

    Returns:
        ``agent -> loss per step`` (the minibatch NLL before each update).

    Raises:
        ValueError: an agent without a policy or without data.
        RuntimeError: a non-finite loss or gradient (names the agent and step).
    """
    missing = [a for a in data if a not in policies]
    empty = [a for a in data if not data[a]]
    if missing or empty:
        raise ValueError(f"behaviour_clone: no policy for {missing}; no data for {empty}")
    agents = [a for a in policies if a in data]
    clones = {a: Clone.of(i, policies[a], data[a], config) for i, a in enumerate(agents)}
    return run_clones(clones, config, progress=progress, on_step=on_step)


class CloneRunner(Protocol):
    """One agent's behaviour cloning, wherever it runs: :class:`Clone` in this process, or one
    in the agent's agent actor (``trainers.run.warm_start``)."""

    def submit(self, agent: str, config: SFTConfig, first: int, last: int, check: bool) -> Any:
        """Starts steps ``first`` to ``last - 1``; a handle for :meth:`wait`."""
        ...

    def wait(self, handle: Any) -> tuple[list[float], float | None]:
        """The steps' losses and, if asked, the held-out match after them."""
        ...


def run_clones(
    clones: Mapping[str, CloneRunner],
    config: SFTConfig,
    *,
    progress: bool = False,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, list[float]]:
    """The loop of :func:`behaviour_clone` over started clones: every agent's steps in blocks
    of ``_EVAL_EVERY`` (all agents' blocks started before any is awaited, so clones in learner
    actors work at once), the held-out checks and the early stop; returns the losses per step.
    The agents' parameters, minibatches and optimizers are separate, so blocking the steps
    changes no number."""
    curves: dict[str, list[float]] = {a: [] for a in clones}
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), disable=not progress, transient=True) as bar:
        bar_task = bar.add_task("behaviour cloning", total=config.steps)
        for first in range(0, config.steps, _EVAL_EVERY):
            last = min(first + _EVAL_EVERY, config.steps)
            check = config.target_accuracy is not None and last % _EVAL_EVERY == 0
            handles = {a: c.submit(a, config, first, last, check) for a, c in clones.items()}
            results = {a: clones[a].wait(h) for a, h in handles.items()}
            for step in range(first, last):
                metrics: dict[str, float] = {"sft/lr": learning_rate(config, step)}
                for agent, (losses, _) in results.items():
                    curves[agent].append(losses[step - first])
                    metrics[f"agent/{agent}/sft_nll"] = losses[step - first]
                done = False
                if check and step == last - 1:
                    team = 1.0
                    for agent, (_, match) in results.items():
                        assert match is not None
                        metrics[f"agent/{agent}/sft_heldout_match"] = match
                        team *= match
                    metrics["sft/heldout_team_match"] = team
                    done = team >= cast(float, config.target_accuracy)
                bar.advance(bar_task)
                if on_step is not None:
                    on_step(step, metrics)
                if done:
                    _log.info("behaviour_clone: held-out team match reached at step %d", step)
                    return curves
    return curves


def learning_rate(config: SFTConfig, step: int) -> float:
    """The learning rate of ``step``: constant, or along the cosine from ``config.lr`` to 0."""
    if config.lr_schedule != "cosine":
        return config.lr
    return config.lr * 0.5 * (1 + math.cos(math.pi * step / config.steps))


@dataclass
class Clone:
    """One agent's behaviour cloning in this process: its policy, training and held-out
    messages, minibatch generator and optimizer."""

    policy: TrainablePolicy
    train: tuple[list[str], list[Completion]]
    held: tuple[list[str], list[Completion]]
    generator: torch.Generator
    optimizer: torch.optim.Optimizer

    @classmethod
    def of(
        cls,
        index: int,
        policy: TrainablePolicy,
        pairs: Sequence[tuple[str, str]],
        config: SFTConfig,
    ) -> Clone:
        """Agent ``index``'s clone of its expert ``pairs`` (the last ones held out when
        ``config.target_accuracy`` is set)."""
        n_held = min(_HOLDOUT, len(pairs) // 5) if config.target_accuracy is not None else 0
        contexts = [c for c, _ in pairs]
        completions = [_completion(policy, t) for _, t in pairs]
        cut = len(pairs) - n_held
        train = (contexts[:cut], completions[:cut])
        return cls(
            policy=policy,
            train=train,
            held=(contexts[cut:], completions[cut:]) if n_held else train,
            generator=torch.Generator().manual_seed(derive_seed(config.seed, index, SFT_STREAM)),
            optimizer=torch.optim.AdamW(
                list(policy.parameters()), lr=config.lr, weight_decay=config.weight_decay
            ),
        )

    def run(
        self, agent: str, config: SFTConfig, first: int, last: int, check: bool
    ) -> tuple[list[float], float | None]:
        """Steps ``first`` to ``last - 1`` (each at its learning rate) and, with ``check``, the
        held-out match after them."""
        losses = []
        for step in range(first, last):
            for group in self.optimizer.param_groups:
                group["lr"] = learning_rate(config, step)
            losses.append(self.step(agent, config, step))
        return losses, _heldout_match(self.policy, *self.held) if check else None

    def submit(
        self, agent: str, config: SFTConfig, first: int, last: int, check: bool
    ) -> tuple[list[float], float | None]:
        return self.run(agent, config, first, last, check)

    def wait(self, handle: Any) -> tuple[list[float], float | None]:
        result: tuple[list[float], float | None] = handle
        return result

    def step(self, agent: str, config: SFTConfig, step: int) -> float:
        """One AdamW step on a random minibatch's mean per-token NLL; returns the NLL.

        Raises:
            RuntimeError: a non-finite loss or gradient norm.
        """
        contexts, completions = self.train
        idx = torch.randperm(len(contexts), generator=self.generator)[: config.batch_size]
        lp, count = _message_logprobs(
            self.policy, [contexts[i] for i in idx], [completions[i] for i in idx]
        )
        loss = -lp.sum() / count.sum().clamp(min=1)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        value = float(loss.detach())
        if not (math.isfinite(value) and math.isfinite(float(norm))):
            raise RuntimeError(
                f"behaviour_clone: non-finite loss ({value}) or gradient norm "
                f"({float(norm)}) for agent {agent!r} at step {step}; lower lr "
                f"(now {config.lr}) or check the policy"
            )
        self.optimizer.step()
        mark_updated(self.policy)  # a rollout engine gets the clone's weights before sampling
        return value


@torch.no_grad()
def _heldout_match(
    policy: TrainablePolicy, contexts: Sequence[str], completions: Sequence[Completion]
) -> float:
    """Mean probability that the policy writes the expert message exactly (temperature 1)."""
    if not contexts:
        return 1.0
    lp, _ = _message_logprobs(policy, contexts, completions)
    return float(lp.exp().mean())
