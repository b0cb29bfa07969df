"""HFPolicy on a tiny local model: exact log-probs, padding/micro-batch invariance, seeding, stop
strings, garbage prompts, save/load and LoRA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from adapters.hf import HFPolicy, _seeded
from adapters.tiny import SPECIAL_TOKENS, TinyModelSpec, build_char_tokenizer, build_tiny_model
from teamtr_core.policy import LoraSettings, SamplingParams, TrainablePolicy

PROMPTS = [
    "Compute: 12 + 30\nReply with: Answer: <integer>\n### solver\n",
    "Hi",
    "",
    "### critic\n" * 7,
]


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> HFPolicy:
    return HFPolicy.from_pretrained(tiny_model_dir)


def test_tokenizer_keeps_spaces_and_maps_unknown_characters() -> None:
    tok = build_char_tokenizer()
    ids = tok("a b  c\n\td", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == "a b  c\n\td"
    assert len(ids) == 9
    unk = tok("é€", add_special_tokens=False)["input_ids"]
    assert unk == [SPECIAL_TOKENS.index("<unk>")] * 2


def test_tiny_model_size_and_offline_reload(tiny_model_dir: Path, policy: HFPolicy) -> None:
    assert 500_000 < sum(p.numel() for p in policy.model.parameters()) < 600_000
    assert (tiny_model_dir / "model.safetensors").exists()
    assert isinstance(policy, TrainablePolicy)
    assert policy.device.type == "cpu" and policy.dtype == torch.float32
    with pytest.raises(ValueError, match="divisible"):
        TinyModelSpec(hidden_size=130, num_heads=4)


def test_missing_model_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build-tiny"):
        HFPolicy.from_pretrained(tmp_path / "nothing")


def _sample_with_scores(policy: HFPolicy, prompts: list[str], seed: int):
    """Samples through transformers' generate directly and returns the sampling distribution's
    log-probs of the sampled tokens (temperature 1, top_k 0)."""
    ids = [policy.prompt_ids(p) for p in prompts]
    width = max(map(len, ids))
    inp = torch.full((len(ids), width), policy.pad_id)
    att = torch.zeros((len(ids), width), dtype=torch.long)
    for r, i in enumerate(ids):
        inp[r, width - len(i) :] = torch.tensor(i)
        att[r, width - len(i) :] = 1
    with _seeded(seed, policy.device), torch.no_grad():
        out = policy.model.generate(
            input_ids=inp,
            attention_mask=att,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=24,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=policy.pad_id,
            eos_token_id=policy.eos_id,
        )
    new = out.sequences[:, width:]
    scores = torch.stack(out.scores, 1).log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
    completions = []
    for row in new.tolist():
        completions.append(row[: row.index(policy.eos_id) + 1] if policy.eos_id in row else row)
    return completions, scores


def test_logprobs_equal_the_sampling_distribution(policy: HFPolicy) -> None:
    completions, scores = _sample_with_scores(policy, PROMPTS, seed=3)
    lp = policy.logprobs(PROMPTS, completions)
    for row, comp in enumerate(completions):
        n = len(comp)
        assert lp.mask[row].sum() == n
        torch.testing.assert_close(lp.logprobs[row, :n], scores[row, :n], atol=1e-5, rtol=0)
        assert torch.all(lp.logprobs[row, n:] == 0)


def test_generate_token_ids_are_what_logprobs_score(policy: HFPolicy) -> None:
    gens = policy.generate(PROMPTS, SamplingParams(temperature=1.0, max_new_tokens=16, seed=0))
    lp = policy.logprobs(PROMPTS, [g.token_ids for g in gens])
    assert lp.logprobs.shape == (4, max(len(g.token_ids) for g in gens))
    assert torch.isfinite(lp.message_logprobs()).all()
    for g in gens:
        assert 1 <= len(g.token_ids) <= 16
        if policy.eos_id in g.token_ids:
            assert g.token_ids[-1] == policy.eos_id and g.token_ids.count(policy.eos_id) == 1


def test_left_padding_and_micro_batching_do_not_change_logprobs(tiny_model_dir: Path) -> None:
    big = HFPolicy.from_pretrained(tiny_model_dir, micro_batch_size=64)
    one = HFPolicy.from_pretrained(tiny_model_dir, micro_batch_size=1)
    completions = ["Answer: 42", "ok", "x" * 30, ""]
    a = big.logprobs(PROMPTS, completions)
    b = one.logprobs(PROMPTS, completions)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
    assert torch.equal(a.mask, b.mask) and a.mask[3].sum() == 0
    alone = big.logprobs(PROMPTS[1:2], completions[1:2])
    torch.testing.assert_close(alone.logprobs[0, :2], a.logprobs[1, :2], atol=1e-5, rtol=0)


def test_generation_alone_equals_generation_in_a_padded_batch(policy: HFPolicy) -> None:
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    batch = policy.generate(PROMPTS, greedy)
    for prompt, gen in zip(PROMPTS, batch):
        assert policy.generate([prompt], greedy)[0] == gen


def test_seeding(policy: HFPolicy) -> None:
    s = SamplingParams(temperature=1.0, max_new_tokens=12, seed=7)
    assert policy.generate(PROMPTS, s) == policy.generate(PROMPTS, s)
    other = SamplingParams(temperature=1.0, max_new_tokens=12, seed=8)
    assert policy.generate(PROMPTS, s) != policy.generate(PROMPTS, other)
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    policy.generate(PROMPTS, s)
    assert torch.equal(torch.rand(1), expected)  # the caller's RNG state is untouched


def test_stop_strings_cut_text_and_tokens(policy: HFPolicy) -> None:
    gens = policy.generate(PROMPTS * 4, SamplingParams(temperature=1.0, max_new_tokens=40, seed=1))
    stop = next(g.text[5:7] for g in gens if len(g.text) > 8 and "<unk>" not in g.text[:8])
    again = policy.generate(
        PROMPTS * 4, SamplingParams(temperature=1.0, max_new_tokens=40, seed=1, stop=(stop,))
    )
    for full, cut in zip(gens, again):
        assert stop not in cut.text
        if stop in full.text:
            assert cut.text == full.text[: full.text.index(stop)]
            decoded = policy.tokenizer.decode(list(cut.token_ids), skip_special_tokens=True)
            assert decoded.endswith(stop) and full.token_ids[: len(cut.token_ids)] == cut.token_ids


def test_a_message_that_runs_out_of_tokens_is_marked_clipped(tiny_model_dir: Path) -> None:
    """``clipped``: generation stopped at the token limit with neither an EOS nor a stop string.
    The limit is ``max_new_tokens`` or, after a long prompt, the room the window leaves."""
    policy = HFPolicy.from_pretrained(tiny_model_dir, max_prompt_tokens=1020)  # a 1024 window
    eos = policy.eos_id
    # An untrained model rarely writes EOS: 3 tokens cut almost every message off.
    gens = policy.generate(PROMPTS * 4, SamplingParams(temperature=1.0, max_new_tokens=3, seed=0))
    assert sum(g.clipped for g in gens) >= 12
    for g in gens:
        assert g.clipped == (eos not in g.token_ids)
        assert not g.clipped or len(g.token_ids) == 3
    # A prompt of 1020 tokens leaves room for 4, whatever max_new_tokens says.
    roomy = SamplingParams(temperature=1.0, max_new_tokens=50, seed=0)
    long = policy.generate(["x" * 5000] * 4, roomy)
    assert all(len(g.token_ids) <= 4 and g.clipped == (eos not in g.token_ids) for g in long)
    assert any(g.clipped for g in long)
    # A stop string that ends a message at the limit does not clip it; the codec's rule.
    ids = policy.codec.completion_ids("abc")
    assert policy.codec.finish(ids, at_limit=True).clipped
    assert not policy.codec.finish(ids, ("b",), at_limit=True).clipped
    assert not policy.codec.finish([*ids, eos], at_limit=True).clipped  # EOS at the limit
    assert not policy.codec.finish(ids).clipped  # stopped for another reason
    # A model that ends its messages (EOS made likely) is never clipped when it has room,
    # even by a limit of one token that the EOS fills.
    head = policy.model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[eos] = 5.0
    policy.model.lm_head = biased
    ended = policy.generate(PROMPTS * 4, SamplingParams(temperature=1.0, max_new_tokens=40, seed=0))
    assert not any(g.clipped for g in ended) and all(g.token_ids[-1] == eos for g in ended)
    assert any(g.text for g in ended)
    one = policy.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=1))
    assert all(g.token_ids == (eos,) and not g.clipped for g in one)


def test_garbage_prompts_never_crash_and_long_ones_keep_their_end(policy: HFPolicy) -> None:
    huge = "Q" * 1_000_000 + "THE END"
    ids = policy.prompt_ids(huge)
    assert len(ids) == policy.max_prompt_tokens
    assert policy.tokenizer.decode(ids[-7:]) == "THE END"
    weird = ["", "\x00\x01\x02", "日本語 ☃ \ud83d", huge]
    gens = policy.generate(weird, SamplingParams(max_new_tokens=8, seed=0))
    assert len(gens) == 4
    lp = policy.logprobs(weird, [g.token_ids for g in gens])
    assert torch.isfinite(lp.message_logprobs()).all()


def test_gradient_steps_raise_the_logprob_of_a_target(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    prompt, target = ["Compute: 1 + 1\n"], ["Answer: 2"]
    before = policy.logprobs(prompt, target).message_logprobs().item()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for _ in range(5):
        opt.zero_grad()
        loss = -policy.logprobs(prompt, target).message_logprobs().sum()
        loss.backward()
        opt.step()
    assert policy.logprobs(prompt, target).message_logprobs().item() > before + 1.0


def test_state_dict_round_trip_and_save_pretrained(tiny_model_dir: Path, tmp_path: Path) -> None:
    a = HFPolicy.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        next(a.model.parameters()).add_(0.1)
    a.save_pretrained(tmp_path / "saved")
    b = HFPolicy.from_pretrained(tmp_path / "saved")
    c = HFPolicy.from_pretrained(tiny_model_dir)
    c.load_state_dict(a.state_dict())
    ref = a.logprobs(PROMPTS, ["abc"] * 4).logprobs
    assert torch.equal(b.logprobs(PROMPTS, ["abc"] * 4).logprobs, ref)
    assert torch.equal(c.logprobs(PROMPTS, ["abc"] * 4).logprobs, ref)


def test_lora_trains_only_adapters_and_saves_loads_merges(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    policy = HFPolicy.from_pretrained(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    assert policy.is_lora
    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    base = {
        n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad
    }
    opt = torch.optim.Adam(policy.parameters(), lr=5e-2)
    for _ in range(3):
        opt.zero_grad()
        (-policy.logprobs(["Q"], ["Answer: 7"]).message_logprobs().sum()).backward()
        opt.step()
    assert all(torch.equal(p, base[n]) for n, p in policy.model.named_parameters() if n in base)
    ref = policy.logprobs(PROMPTS, ["Answer: 7"] * 4).logprobs.detach()
    policy.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    loaded = HFPolicy.from_pretrained(tiny_model_dir, adapter_path=tmp_path / "adapter")
    torch.testing.assert_close(
        loaded.logprobs(PROMPTS, ["Answer: 7"] * 4).logprobs, ref, atol=1e-6, rtol=0
    )
    plain = HFPolicy.from_pretrained(tiny_model_dir)
    assert not torch.allclose(plain.logprobs(PROMPTS, ["Answer: 7"] * 4).logprobs, ref, atol=1e-3)
    loaded.merge_lora()
    assert not loaded.is_lora
    torch.testing.assert_close(
        loaded.logprobs(PROMPTS, ["Answer: 7"] * 4).logprobs, ref, atol=1e-5, rtol=0
    )


def test_a_lora_state_dict_is_the_adapter_alone(tiny_model_dir: Path) -> None:
    """Checkpoints and weight syncs of a LoRA agent carry its adapter, not the frozen base; a
    whole model's state (an older checkpoint) still loads."""
    policy = HFPolicy.from_pretrained(tiny_model_dir, lora=LoraSettings(r=2))
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.1)
    state = policy.state_dict()
    assert state and all("lora_" in key for key in state)
    assert sum(v.numel() for v in state.values()) == sum(p.numel() for p in policy.parameters())
    ref = policy.logprobs(PROMPTS, ["abc"] * 4).logprobs
    for saved in (state, policy.model.state_dict()):
        other = HFPolicy.from_pretrained(tiny_model_dir, lora=LoraSettings(r=2))
        other.load_state_dict(saved)
        torch.testing.assert_close(other.logprobs(PROMPTS, ["abc"] * 4).logprobs, ref)


def test_invalid_arguments(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="micro_batch_size"):
        HFPolicy.from_pretrained(tiny_model_dir, micro_batch_size=0)
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        HFPolicy.from_pretrained(tiny_model_dir, max_prompt_tokens=5000)
    with pytest.raises(ValueError, match="no chat template"):
        HFPolicy.from_pretrained(tiny_model_dir, chat_template=True)
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        policy.logprobs(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="exceeds"):
        policy.logprobs(["a"], ["x" * 2000])


def test_chat_template_rendering(tiny_model_dir: Path, tmp_path: Path) -> None:
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    policy.tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    templated = HFPolicy(policy.model, policy.tokenizer)
    assert templated.use_chat_template
    assert policy.tokenizer.decode(templated.prompt_ids("hi")) == "<user>hi\n<assistant>"
    gens = templated.generate(["hi"], SamplingParams(max_new_tokens=4, seed=0))
    assert len(gens[0].token_ids) >= 1


def test_build_tiny_model_custom_spec(tmp_path: Path) -> None:
    path = build_tiny_model(
        tmp_path / "m",
        TinyModelSpec(
            hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=128
        ),
    )
    policy = HFPolicy.from_pretrained(path)
    assert policy.context_window == 128 and policy.max_prompt_tokens == 64
    assert (path / "teamtr_tiny.json").exists()


def test_gradient_checkpointing_gives_the_same_logprobs_and_gradients(tiny_model_dir: Path) -> None:
    prompts, completions = ["Compute: 1 + 2\n", "Say hi\n"], ["Answer: 3", "hi there"]
    grads = []
    for checkpointing in (False, True):
        policy = HFPolicy.from_pretrained(tiny_model_dir)
        if checkpointing:
            policy.enable_gradient_checkpointing()
            assert policy.checkpointing_active
        out = policy.logprobs(prompts, completions)
        (out.logprobs * out.mask).sum().backward()
        grads.append((out.logprobs.detach(), [p.grad.clone() for p in policy.parameters()]))
        assert not policy.model.training  # back in eval mode afterwards
    (lp_a, g_a), (lp_b, g_b) = grads
    assert torch.allclose(lp_a, lp_b, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g_a, g_b))


def test_bf16_autocast_scores_close_to_full_precision_and_trains(tiny_model_dir: Path) -> None:
    import teamtr_env
    from teamtr_core.config import from_dict
    from teamtr_env.rollout import MessageRecord
    from trainers.config import TrainConfig
    from trainers.learners.team_trainer import TeamTrainer
    from trainers.optim.scoring import score

    policy = HFPolicy.from_pretrained(tiny_model_dir)
    msgs = [MessageRecord(0, 0, 0, "a", "Compute: 1 + 2\n", "Answer: 3")]
    full = score(policy, msgs, 8)[0]
    half = score(policy, msgs, 8, autocast="bf16")[0]
    assert half.logprobs.dtype == torch.float32
    assert torch.allclose(full.logprobs, half.logprobs, atol=0.1)
    assert not torch.equal(full.logprobs, half.logprobs)  # it did run in bfloat16
    config = from_dict(
        TrainConfig,
        {
            "task": "teamtr/Arith-v0",
            "task_options": {"digits": 1, "agents": ["solver"], "max_turns": 1},
            "sampling": {"max_new_tokens": 6},
            "sft": None,
            "schedule": {"stages": 1, "problems_per_batch": 2, "group_size": 2},
            "optim": {"autocast": "bf16", "gradient_checkpointing": True, "epochs": 1},
        },
    )
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0", digits=1, agents=["solver"], max_turns=1)  # noqa: E731
    trainer = TeamTrainer(config, env_fn, {"solver": HFPolicy.from_pretrained(tiny_model_dir)})
    assert trainer.slots["solver"].policy.gradient_checkpointing  # type: ignore[attr-defined]
    (update,) = trainer.run_stage().updates
    assert update.accepted and 0 <= update.kl_tok < 1


def test_an_agents_later_turns_share_one_forward_pass_with_the_same_logprobs(
    tiny_model_dir: Path,
) -> None:
    """Six turns of a three-agent team: each agent's second context extends its first message, so
    its two messages are scored in one pass over the longer sequence, with the same log-probs
    and gradients as scoring each alone; truncated contexts fall back to a pass each."""
    import teamtr_env
    from adapters.hf import _prefix_hosts
    from adapters.scripted import ScriptedExpert
    from teamtr_env.runners import Runner

    def env_fn():  # type: ignore[no-untyped-def]
        return teamtr_env.make("teamtr/Arith-v0", digits=1, max_turns=6)

    runner = Runner(env_fn, ScriptedExpert(env_fn().task, error_rate=0.5, seed=0), progress=False)
    batch = runner.rollout(runner.sample_problems(3, seed=0), group_size=2, seed=0)
    msgs = batch.messages_of("solver")
    prompts, texts = [m.context for m in msgs], [m.text for m in msgs]
    results = {}
    for shared in (True, False):
        policy = HFPolicy.from_pretrained(tiny_model_dir, shared_prefix=shared)
        out = policy.logprobs(prompts, texts)
        (out.logprobs * out.mask).sum().backward()
        results[shared] = (out, [p.grad.clone() for p in policy.parameters()])
    seqs = [
        tuple(policy.prompt_ids(p) + policy.codec.completion_ids(t)) for p, t in zip(prompts, texts)
    ]
    assert len(msgs) == 12 and len(set(_prefix_hosts(seqs))) == 6  # one pass per episode
    (a, grads_a), (b, grads_b) = results[True], results[False]
    assert torch.equal(a.mask, b.mask) and torch.equal(a.token_ids, b.token_ids)
    assert torch.allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(grads_a, grads_b))
    short = HFPolicy.from_pretrained(tiny_model_dir, max_prompt_tokens=40)  # contexts cut
    cut = [
        tuple(short.prompt_ids(p) + short.codec.completion_ids(t)) for p, t in zip(prompts, texts)
    ]
    hosts = _prefix_hosts(cut)  # a cut context no longer extends the agent's earlier turn
    assert all(cut[h][: len(s) - 1] == s[:-1] for h, s in zip(hosts, cut))
    assert len(set(hosts)) > 6
    alone = HFPolicy.from_pretrained(tiny_model_dir, max_prompt_tokens=40, shared_prefix=False)
    assert torch.allclose(
        short.logprobs(prompts, texts).logprobs, alone.logprobs(prompts, texts).logprobs, atol=1e-5
    )


def test_a_groups_shared_prompt_runs_once_with_the_same_logprobs(tiny_model_dir: Path) -> None:
    """G samples of each of three prompts of different lengths: each prompt is run once and its
    keys and values serve its samples; log-probs and gradients equal the one-pass-each ones."""
    prompts = [
        p for p in ("Compute: 1 + 2\n", "Say hi to the team please\n", "x\n") for _ in range(4)
    ]
    completions = [
        "Answer: 3",
        "Bye",
        "no way",
        "ok",
        "hi",
        "jello",
        "kk",
        "lol",
        "yy",
        "zz",
        "qq",
        "x!",
    ]
    results = {}
    for shared in (True, False):
        policy = HFPolicy.from_pretrained(tiny_model_dir, shared_prefix=shared)
        calls: list[int] = []
        original = policy._forward

        def counting(input_ids, attention, _orig=original, _calls=calls, **kw):  # type: ignore[no-untyped-def]
            _calls.append(input_ids.shape[0])
            return _orig(input_ids, attention, **kw)

        policy._forward = counting  # type: ignore[method-assign]
        out = policy.logprobs(prompts, completions)
        (out.logprobs * out.mask).sum().backward()
        results[shared] = (
            out.logprobs.detach(),
            [p.grad.clone() for p in policy.parameters()],
            calls,
        )
    (a, grads_a, calls_a), (b, grads_b, calls_b) = results[True], results[False]
    assert calls_a == [3, 12] and calls_b == [12]  # the 3 prompts once, then the 12 completions
    assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-5)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(grads_a, grads_b))


def test_a_groups_shared_prompt_is_prefilled_once_with_the_same_samples(policy: HFPolicy) -> None:
    """G samples each of three prompts of different lengths: each distinct prompt runs through
    the model once (but its last token), its keys and values serve its copies, and the samples
    are those of the plain path (seeded and greedy), with the same token ids."""
    prompts = [
        p for p in ("Compute: 1 + 2\n", "Say hi to the team please\n", "x\n") for _ in range(4)
    ]
    seeded = SamplingParams(temperature=1.0, max_new_tokens=6, seed=3)
    seen: list[tuple[int, ...]] = []
    hook = policy.model.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        policy.generate(prompts, seeded)
    finally:
        hook.remove()
    width = max(len(policy.prompt_ids(p)) for p in prompts)
    assert seen[0] == (3, width - 1) and set(seen[1:]) == {(12, 1)}  # prefill once, then 1 token
    plain = HFPolicy(policy.model, policy.tokenizer)
    plain._shared_prefill = lambda *args: None  # type: ignore[method-assign]
    for sampling in (seeded, SamplingParams(temperature=0.0, max_new_tokens=6)):
        a, b = policy.generate(prompts, sampling), plain.generate(prompts, sampling)
        assert [g.token_ids for g in a] == [g.token_ids for g in b]
    # Mostly distinct prompts take the plain path: there is nothing to share.
    ids = [policy.prompt_ids(p) for p in ("a\n", "bb\n", "ccc\n", "dddd\n")]
    assert policy._shared_prefill(ids, torch.empty(0), torch.empty(0)) is None


def test_a_gradient_pass_shares_prompts_only_where_that_lowers_its_peak(
    tiny_model_dir: Path,
) -> None:
    """Shared, the prompts' pass keeps its activations while the gradients fill, so a gradient
    pass shares only when the prompt tokens it saves outweigh the gradients' bytes (long prompts
    sampled many times); a pass without a gradient always shares (issue #47: a full-weight
    model's short prompts otherwise raised the update's peak above a plain step's)."""
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    gradients = sum(p.numel() * p.element_size() for p in policy.parameters())
    short = [(*range(8), 100 + i) for i in range(4)]  # one 8-token prompt, 4 samples
    long = [(*range(400), 100 + i) for i in range(8)]  # one 400-token prompt, 8 samples
    assert not policy._sharing_lowers_peak(short, [tuple(range(8))])
    assert policy._sharing_lowers_peak(long, [tuple(range(400))])
    assert gradients > 2e6  # the tiny model's 0.55M parameters, in fp32
    prompts, completions = ["x\n"] * 4, ["ab", "cd", "ef", "gh"]
    calls: list[int] = []
    original = policy._forward

    def counting(input_ids, attention, **kw):  # type: ignore[no-untyped-def]
        calls.append(input_ids.shape[0])
        return original(input_ids, attention, **kw)

    policy._forward = counting  # type: ignore[method-assign]
    with torch.no_grad():
        policy.logprobs(prompts, completions)
    assert calls == [1, 4]  # no gradient: the prompt once, then the completions on top
    calls.clear()
    policy.logprobs(prompts, completions)
    assert calls == [4]  # a gradient pass of short prompts: one plain pass
