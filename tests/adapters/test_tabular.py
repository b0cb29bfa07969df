"""The exact tabular policy: probabilities, gradients, sampling, seeding, state dicts, exact KL/TV,
errors and the runner end to end."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import teamtr_env
from adapters.tabular import (
    TabularPolicy,
    UnknownMessageError,
    UnknownStateError,
    state_kl,
    state_tv,
)
from teamtr_core.policy import Generation, Policy, SamplingParams, TrainablePolicy
from teamtr_env.runners import Runner

MESSAGES = ["yes", "no", "maybe"]


def with_table(table: list[list[float]], **kwargs) -> TabularPolicy:
    """A policy whose states are "s0", "s1", ... and messages m0, m1, ... with these logits."""
    states = [f"s{i}" for i in range(len(table))]
    messages = [f"m{j}" for j in range(len(table[0]))]
    policy = TabularPolicy(states, messages, **kwargs)
    policy.load_state_dict({"logits": torch.tensor(table, dtype=torch.float64)})
    return policy


def frequencies(
    policy: TabularPolicy, state: str, n: int, sampling: SamplingParams
) -> torch.Tensor:
    gens = policy.generate([state] * n, sampling)
    ids = torch.tensor([g.token_ids[0] for g in gens])
    return torch.bincount(ids, minlength=len(policy.messages)).double() / n


# ---------------------------------------------------------------- exact probabilities


def test_uniform_init_probs_and_logprobs() -> None:
    policy = TabularPolicy(["a", "b"], MESSAGES)
    assert policy.logits.dtype == torch.float64 and policy.logits.shape == (2, 3)
    torch.testing.assert_close(policy.probs("a"), torch.full((3,), 1 / 3, dtype=torch.float64))
    assert torch.allclose(policy.log_probs_table(), torch.full((2, 3), -math.log(3)).double())
    out = policy.logprobs(["a", "b", "a"], ["maybe", (0,), (1,)])
    assert out.logprobs.shape == out.mask.shape == out.token_ids.shape == (3, 1)
    assert out.mask.dtype == torch.bool and bool(out.mask.all())
    assert out.token_ids.flatten().tolist() == [2, 0, 1]
    assert torch.allclose(out.logprobs, torch.full((3, 1), -math.log(3)).double())
    torch.testing.assert_close(out.message_logprobs(), out.logprobs[:, 0])


def test_random_init_is_seeded_and_lookups() -> None:
    a, b = (TabularPolicy(["x"], MESSAGES, init="random", seed=s) for s in (5, 5))
    assert torch.equal(a.logits, b.logits) and a.logits.abs().sum() > 0
    assert not torch.equal(a.logits, TabularPolicy(["x"], MESSAGES, init="random", seed=6).logits)
    assert a.message_index("no") == 1 and a.state_index("x") == 0
    keyed = TabularPolicy(["short", "long"], MESSAGES, featurize=lambda c: "long" * (len(c) > 5))
    assert keyed.state_index("long context") == 1 and keyed.state_index("short") == 0


def test_gradients_only_on_seen_states_and_sgd_step_is_exact() -> None:
    policy = TabularPolicy(["a", "b", "c"], ["m0", "m1"])
    loss = -policy.logprobs(["a", "b", "a"], [(0,), "m1", (0,)]).logprobs.sum()
    loss.backward()
    grad = policy.logits.grad
    assert grad is not None
    # d(-log p_m)/d logits = p - onehot(m): row a twice for m0, row b once for m1, row c untouched.
    expected = torch.tensor([[-1.0, 1.0], [0.5, -0.5], [0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(grad, expected)
    policy.zero_grad()
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    (-policy.logprobs(["a"], [(0,)]).logprobs.sum()).backward()
    opt.step()
    # logits[a] = [0.25, -0.25]  ->  p(m0|a) = sigmoid(0.5) exactly; other rows unchanged.
    p = policy.probs("a")[0].item()
    assert p == pytest.approx(1 / (1 + math.exp(-0.5)), abs=1e-15) and p > 0.5
    torch.testing.assert_close(policy.probs("c"), torch.full((2,), 0.5, dtype=torch.float64))


# ---------------------------------------------------------------- sampling


def test_sampling_frequencies_match_softmax_and_temperature() -> None:
    policy = with_table([[1.0, 0.0, -1.0, 0.5]])
    logits = policy.logits.detach()[0]
    freq = frequencies(policy, "s0", 20_000, SamplingParams(temperature=1.0, seed=1))
    assert (freq - torch.softmax(logits, -1)).abs().max() < 0.01
    hot = frequencies(policy, "s0", 20_000, SamplingParams(temperature=2.0, seed=2))
    assert (hot - torch.softmax(logits / 2, -1)).abs().max() < 0.01
    assert hot.max() < torch.softmax(logits, -1).max() - 0.05  # flatter
    greedy = policy.generate(["s0"] * 50, SamplingParams(temperature=0.0, seed=3))
    assert {g.text for g in greedy} == {"m0"}
    # temperature_applies=False samples the temperature-1 policy whatever the params say.
    flat = with_table([[1.0, 0.0, -1.0, 0.5]], temperature_applies=False)
    same = frequencies(flat, "s0", 20_000, SamplingParams(temperature=0.0, seed=1))
    assert (same - torch.softmax(logits, -1)).abs().max() < 0.01


def test_greedy_ties_go_to_lowest_index_and_truncation() -> None:
    policy = with_table([[1.0, 3.0, 3.0, 2.0]])
    assert {g.token_ids for g in policy.generate(["s0"] * 20, SamplingParams(0.0))} == {(1,)}
    top2 = frequencies(policy, "s0", 2000, SamplingParams(1.0, top_k=2, seed=0))
    assert top2[1] > 0.4 and top2[2] > 0.4 and top2[0] == top2[3] == 0
    p = torch.softmax(policy.logits.detach()[0], -1)  # ~[0.06, 0.43, 0.43, 0.16]
    nucleus = frequencies(policy, "s0", 2000, SamplingParams(1.0, top_p=float(p[1]), seed=0))
    assert nucleus[1] == 1.0


def test_seeding() -> None:
    policy = TabularPolicy(["s"], MESSAGES)
    prompts = ["s"] * 200
    first = policy.generate(prompts, SamplingParams(seed=7))
    assert first == policy.generate(prompts, SamplingParams(seed=7))
    assert first != policy.generate(prompts, SamplingParams(seed=8))
    assert all(isinstance(g, Generation) and g.text == MESSAGES[g.token_ids[0]] for g in first)
    # Without a seed the internal generator advances, and is seeded at construction.
    a, b = TabularPolicy(["s"], MESSAGES, seed=3), TabularPolicy(["s"], MESSAGES, seed=3)
    unseeded = SamplingParams(seed=None)
    a1, a2 = a.generate(prompts, unseeded), a.generate(prompts, unseeded)
    assert a1 != a2 and a1 == b.generate(prompts, unseeded)
    assert policy.generate([], SamplingParams()) == []


# ---------------------------------------------------------------- state dicts and copies


def test_state_dict_round_trip_and_copy_is_independent() -> None:
    source = TabularPolicy(["a", "b"], MESSAGES, init="random", seed=11)
    target = TabularPolicy(["a", "b"], MESSAGES)
    target.load_state_dict(source.state_dict())
    assert list(source.state_dict()) == ["logits"]
    assert torch.equal(target.log_probs_table(), source.log_probs_table())
    frozen = source.copy()
    before = frozen.log_probs_table().detach().clone()
    with torch.no_grad():
        source.logits[0, 0] += 5.0
    assert torch.equal(frozen.log_probs_table(), before)
    assert not torch.equal(source.log_probs_table(), before)
    assert frozen.logits is not source.logits and frozen.featurize is source.featurize


# ---------------------------------------------------------------- exact KL and TV


def test_state_kl_and_tv_hand_computed() -> None:
    # old: s0 -> [1/2, 1/2], s1 -> [9/10, 1/10];  new: s0 -> [3/4, 1/4], s1 -> [1/2, 1/2].
    old = with_table([[0.0, 0.0], [math.log(9.0), 0.0]])
    new = with_table([[math.log(3.0), 0.0], [0.0, 0.0]])
    kl = state_kl(old, new)
    # s0: 0.5 log(0.5/0.75) + 0.5 log(0.5/0.25) = 0.5 log(4/3)            = 0.1438410362
    # s1: 0.9 log(0.9/0.5)  + 0.1 log(0.1/0.5)  = 0.9 log 1.8 - 0.1 log 5 = 0.3680642071
    assert kl.shape == (2,)
    assert kl.tolist() == pytest.approx([0.1438410362, 0.3680642071], abs=1e-9)
    # TV: s0: 0.5 (1/4 + 1/4) = 0.25;  s1: 0.5 (0.4 + 0.4) = 0.4
    assert state_tv(old, new).tolist() == pytest.approx([0.25, 0.4], abs=1e-12)
    assert state_kl(old, old).tolist() == [0.0, 0.0]
    assert state_tv(new, new).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="same states and messages"):
        state_kl(old, with_table([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))


@st.composite
def table_pairs(draw: st.DrawFn) -> tuple[list[list[float]], list[list[float]]]:
    s, m = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    logit = st.floats(-8.0, 8.0, allow_nan=False)
    row = st.lists(logit, min_size=m, max_size=m)
    return draw(st.lists(row, min_size=s, max_size=s)), draw(st.lists(row, min_size=s, max_size=s))


@settings(max_examples=60, deadline=None)
@given(table_pairs())
def test_kl_is_nonnegative_and_tv_bounded(tables: tuple[list[list[float]], ...]) -> None:
    old, new = with_table(tables[0]), with_table(tables[1])
    kl, tv = state_kl(old, new), state_tv(old, new)
    assert bool((kl >= -1e-12).all())
    assert bool(((tv >= 0) & (tv <= 1 + 1e-12)).all())
    assert bool((tv <= torch.sqrt(kl.clamp(min=0) / 2) + 1e-9).all())  # Pinsker
    assert state_kl(old, old).abs().max() < 1e-12


def test_token_level_estimator_converges_to_exact_kl() -> None:
    """Lemma B.3 for one-token messages: E_{m ~ pi_old}[log pi_old(m|s) - log pi_new(m|s)]."""
    old = with_table([[0.5, -0.2, 0.1], [1.0, 0.0, -1.0]])
    new = with_table([[0.0, 0.3, -0.4], [0.0, 0.5, 0.0]])
    exact = state_kl(old, new)
    for s, state in enumerate(old.states):
        prompts = [state] * 50_000
        ids = [g.token_ids for g in old.generate(prompts, SamplingParams(1.0, seed=s))]
        with torch.no_grad():
            ratio = old.logprobs(prompts, ids).message_logprobs()
            ratio -= new.logprobs(prompts, ids).message_logprobs()
        assert abs(ratio.mean().item() - exact[s].item()) < 0.01
    assert exact.min() > 0.02  # the check is not vacuous


# ---------------------------------------------------------------- errors


def test_unknown_state_and_message_errors() -> None:
    policy = TabularPolicy(["a", "b", "c"], MESSAGES)
    with pytest.raises(UnknownStateError, match=r"Unknown state 'x{80}…': not one of the 3 states"):
        policy.generate(["x" * 500], SamplingParams())
    with pytest.raises(KeyError):
        policy.probs("zzz")
    with pytest.raises(ValueError, match="Unknown state 'zzz'"):
        policy.logprobs(["zzz"], [(0,)])
    with pytest.raises(UnknownMessageError, match="Unknown message 'perhaps': not one of the 3"):
        policy.logprobs(["a"], ["perhaps"])
    with pytest.raises(UnknownMessageError, match=r"token ids \[3\] are not one message index"):
        policy.logprobs(["a"], [(3,)])
    with pytest.raises(UnknownMessageError, match=r"token ids \[0, 1\]"):
        policy.logprobs(["a"], [(0, 1)])
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        policy.logprobs(["a", "b"], [(0,)])
    with pytest.raises(ValueError, match="messages must be non-empty and distinct"):
        TabularPolicy(["a"], ["m", "m"])
    assert policy.logits.shape == (3, 3)  # never grows


# ---------------------------------------------------------------- runner end to end


def test_runs_in_the_project_runner() -> None:
    messages = ["Answer: 1", "Answer: 2"]
    policy = TabularPolicy(["any"], messages, featurize=lambda ctx: "any")
    assert isinstance(policy, TrainablePolicy) and isinstance(policy, Policy)
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0", agents=["solo"], max_turns=1)  # noqa: E731
    runner = Runner(env_fn, policy)
    batch = runner.rollout(runner.sample_problems(3, seed=0), group_size=4, seed=0)
    assert len(batch.messages) == 12 and len(batch.episodes) == 12
    assert all(
        m.text in messages and m.token_ids == (messages.index(m.text),) for m in batch.messages
    )
    again = runner.rollout(runner.sample_problems(3, seed=0), group_size=4, seed=0)
    assert again.messages == batch.messages
    scored = policy.logprobs(
        [m.context for m in batch.messages], [m.token_ids for m in batch.messages]
    )
    assert torch.allclose(scored.message_logprobs(), torch.full((12,), -math.log(2)).double())
