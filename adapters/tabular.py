"""An exact tabular policy: one softmax over a small finite message set per state.

Every message is a single "token" (its index in ``messages``), so ``log pi(m|s)`` is one entry of
a ``[S, M]`` float64 log-softmax table. Tests and small experiments can therefore enumerate J,
occupancies and KL divergences exactly, and compare the trainers' estimators against them.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from typing import Literal

import torch
from torch import nn

from teamtr_core.choices import choice_errors
from teamtr_core.policy import Completion, Generation, SamplingParams, TokenLogprobs

TableInit = Literal["uniform", "random"]


class TabularLookupError(KeyError, ValueError):
    """A state or message that is not in the table (both a ``KeyError`` and a ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownStateError(TabularLookupError):
    """``featurize(context)`` gave a key that is not one of the policy's states."""


class UnknownMessageError(TabularLookupError):
    """A completion that is not one of the policy's messages."""


def _shorten(key: object, limit: int = 80) -> str:
    text = str(key)
    return text if len(text) <= limit else text[:limit] + "…"


class TabularPolicy(nn.Module):
    """A differentiable softmax table ``pi(m|s) = softmax(logits[s])[m]`` over fixed messages.

    Sampling (``generate``) uses ``softmax(logits[s] / T)`` with ``T = sampling.temperature``
    when ``temperature_applies`` (the default); ``T = 0`` is greedy, ties going to the lowest
    index. ``top_k``/``top_p`` truncate that distribution as usual; ``max_new_tokens`` and
    ``stop`` are ignored (a message is one token). Scoring (``logprobs``, ``probs``,
    ``log_probs_table``, ``state_kl``) is always at temperature 1: the policy being trained.
    The table's rows are fixed at construction, so optimizer state shapes never change.

    Args:
        states: the state keys, one table row each (distinct).
        messages: the message texts, one table column each (distinct).
        featurize: maps a rendered context to its state key; default: the context itself.
        init: ``"uniform"`` (zero logits) or ``"random"`` (standard normal logits).
        seed: seeds the random init and the sampler used when ``sampling.seed`` is ``None``.
        temperature_applies: if False, ``generate`` ignores ``sampling.temperature`` (samples
            are then exactly on-policy for ``logprobs``).

    Raises:
        ValueError: empty or duplicated states or messages, or an unknown ``init``.
    """

    def __init__(
        self,
        states: Sequence[str],
        messages: Sequence[str],
        *,
        featurize: Callable[[str], str] | None = None,
        init: TableInit = "uniform",
        seed: int = 0,
        temperature_applies: bool = True,
    ) -> None:
        super().__init__()
        self.states, self.messages = tuple(states), tuple(messages)
        errors = [
            f"{what} must be non-empty and distinct, got {len(xs)} with {len(set(xs))} distinct"
            for what, xs in (("states", self.states), ("messages", self.messages))
            if not xs or len(set(xs)) != len(xs)
        ]
        errors += choice_errors("init", init, TableInit)
        if errors:
            raise ValueError("Invalid TabularPolicy: " + "; ".join(errors))
        self._state_index = {s: i for i, s in enumerate(self.states)}
        self._message_index = {m: i for i, m in enumerate(self.messages)}
        self.featurize = featurize
        self.temperature_applies = temperature_applies
        self._generator = torch.Generator().manual_seed(seed)
        shape = (len(self.states), len(self.messages))
        table = torch.zeros(shape, dtype=torch.float64)
        if init == "random":
            table = torch.randn(shape, generator=self._generator, dtype=torch.float64)
        self.logits = nn.Parameter(table)

    # -- lookups ---------------------------------------------------------------------------
    def state_index(self, state_or_context: str) -> int:
        """The table row of a state key, or else of ``featurize(context)``.

        Raises:
            UnknownStateError: the (featurized) key is not a state.
        """
        if state_or_context in self._state_index:
            return self._state_index[state_or_context]
        key = self.featurize(state_or_context) if self.featurize else state_or_context
        if key not in self._state_index:
            raise UnknownStateError(
                f"Unknown state {_shorten(key)!r}: not one of the {len(self.states)} states of "
                "this TabularPolicy (rows are fixed at construction; add the state there)"
            )
        return self._state_index[key]

    def message_index(self, text: str) -> int:
        """The table column (= token id) of a message text.

        Raises:
            UnknownMessageError: ``text`` is not one of the messages.
        """
        if text not in self._message_index:
            raise UnknownMessageError(
                f"Unknown message {_shorten(text)!r}: not one of the {len(self.messages)} "
                "messages of this TabularPolicy"
            )
        return self._message_index[text]

    def _completion_index(self, completion: Completion) -> int:
        if isinstance(completion, str):
            return self.message_index(completion)
        ids = list(completion)
        index = operator.index(ids[0]) if len(ids) == 1 else -1
        if not 0 <= index < len(self.messages):
            raise UnknownMessageError(
                f"Completion token ids {_shorten(ids)} are not one message index in "
                f"[0, {len(self.messages)}): a tabular message is exactly one token"
            )
        return index

    # -- exact quantities ------------------------------------------------------------------
    def log_probs_table(self) -> torch.Tensor:
        """``log pi(m|s)`` for every state and message, ``[S, M]`` (differentiable)."""
        return torch.log_softmax(self.logits, dim=-1)

    def probs(self, state_or_context: str) -> torch.Tensor:
        """``pi(.|s)`` at temperature 1, ``[M]`` (differentiable); see ``state_index``."""
        return torch.softmax(self.logits[self.state_index(state_or_context)], dim=-1)

    # -- the policy interface --------------------------------------------------------------
    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """One sampled message per prompt; ``token_ids`` is ``(message index,)``.

        Seeded by ``sampling.seed`` when set, else by the internal generator.
        """
        if not prompts:
            return []
        rows = torch.tensor([self.state_index(p) for p in prompts], dtype=torch.long)
        with torch.no_grad():
            logits = self.logits[rows]
            t = sampling.temperature if self.temperature_applies else 1.0
            if t == 0:
                picks = torch.argmax(logits, dim=-1)  # first maximum: ties -> lowest index
            else:
                probs = _truncate(torch.softmax(logits / t, dim=-1), sampling)
                gen = self._generator
                if sampling.seed is not None:
                    gen = torch.Generator().manual_seed(sampling.seed)
                picks = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        return [Generation(self.messages[m], (m,)) for m in picks.tolist()]

    def logprobs(self, prompts: Sequence[str], completions: Sequence[Completion]) -> TokenLogprobs:
        """``log pi(m_b | s_b)`` at temperature 1 as ``[B, 1]`` token log-probs (all counted).

        Raises:
            ValueError: ``prompts`` and ``completions`` differ in length.
            UnknownStateError, UnknownMessageError: a state or message not in the table.
        """
        if len(prompts) != len(completions):
            raise ValueError(f"got {len(prompts)} prompts but {len(completions)} completions")
        rows = torch.tensor([self.state_index(p) for p in prompts], dtype=torch.long)
        cols = torch.tensor([self._completion_index(c) for c in completions], dtype=torch.long)
        logprobs = self.log_probs_table()[rows, cols].unsqueeze(-1)
        mask = torch.ones_like(logprobs, dtype=torch.bool)
        return TokenLogprobs(logprobs, mask, cols.unsqueeze(-1))

    def copy(self) -> TabularPolicy:
        """An independent deep copy (same table, own parameters), e.g. to freeze ``pi_old``."""
        return copy.deepcopy(self)


def _truncate(probs: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """Applies ``top_k`` then ``top_p`` (keeping at least one message) and renormalises."""
    order = torch.sort(probs, dim=-1, descending=True, stable=True)
    keep = torch.ones_like(probs, dtype=torch.bool)
    if sampling.top_k:
        keep &= torch.arange(probs.shape[-1]) < sampling.top_k
    if sampling.top_p < 1.0:
        before = torch.cumsum(order.values, dim=-1) - order.values  # mass ranked above
        keep &= before < sampling.top_p
    kept = torch.zeros_like(probs).scatter(-1, order.indices, order.values * keep)
    return kept / kept.sum(-1, keepdim=True)


def _check_same_table(old: TabularPolicy, new: TabularPolicy) -> None:
    if old.states != new.states or old.messages != new.messages:
        raise ValueError("the two TabularPolicies must have the same states and messages, in order")


def state_kl(old: TabularPolicy, new: TabularPolicy) -> torch.Tensor:
    """Exact per-state reverse KL ``KL(pi_old(.|s) || pi_new(.|s))``, ``[S]``.

    This is what the token-level estimator ``log pi_old(m|s) - log pi_new(m|s)``, ``m ~ pi_old``,
    estimates (paper Lemma B.3). Differentiable in both tables; assumes finite logits.

    Raises:
        ValueError: the policies differ in states or messages.
    """
    _check_same_table(old, new)
    log_p, log_q = old.log_probs_table(), new.log_probs_table()
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def state_tv(old: TabularPolicy, new: TabularPolicy) -> torch.Tensor:
    """Exact per-state total variation ``0.5 * sum_m |pi_old(m|s) - pi_new(m|s)|``, ``[S]``.

    Raises:
        ValueError: the policies differ in states or messages.
    """
    _check_same_table(old, new)
    diff = old.log_probs_table().exp() - new.log_probs_table().exp()
    return 0.5 * diff.abs().sum(-1)
