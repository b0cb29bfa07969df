"""teamtr's mapping of CoMLRL's learners, checked against CoMLRL's own code (``comlrl`` 1.4.3, the
``peers`` extra): the same batch (the same model, prompts, completion tokens and rewards) goes
through CoMLRL's ``MAGRPOTrainer`` update (``_compute_advantages``, ``_compute_loss_with_gradients``
and ``_update_from_samples``, its AdamW) and through teamtr's ``independent`` learner's
(``batch_advantages``, ``message_advantages``, ``update_agent``, ``LocalUpdater``'s AdamW); the
advantages, the policy-gradient loss, the gradient and the parameters after one step agree.

The mapping (docs/adding-a-trainer.md): CoMLRL's ``advantage_mode`` and ``advantage_normalization``
onto ``optim.advantage`` and ``optim.normalize_advantages``, with ``optim.epochs: 1``,
``trust_region.delta_mode: none``, ``optim.weight_decay: 0.01`` (CoMLRL keeps torch's AdamW
default) and no gradient clipping (CoMLRL does not clip: ``optim.max_grad_norm`` far above any
norm). With its default normalisation on, CoMLRL's MARLOO and MAREINFORCE standardise the
leave-one-out and raw advantages per group, which gives MAGRPO's advantages: teamtr's ``group``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

comlrl = pytest.importorskip(
    "comlrl", reason="comlrl is not installed (the peers extra: pip install -e '.[peers]')"
)

from adapters.hf import HFPolicy  # noqa: E402
from adapters.tiny import build_tiny_model  # noqa: E402
from teamtr_core.config import from_dict  # noqa: E402
from teamtr_env.rollout import EpisodeRecord, MessageRecord, RolloutBatch, RolloutStats  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.learners.stage import batch_advantages, message_advantages  # noqa: E402
from trainers.optim.scoring import concat_logprobs, score  # noqa: E402
from trainers.optim.update import update_agent  # noqa: E402
from trainers.placement.updaters import LocalUpdater  # noqa: E402

pytestmark = pytest.mark.xdist_group("comlrl")

G = 4
PROMPTS = ["Compute: 3 + 4\n### solver\n", "Compute: 12 + 9\n### solver\n"]
COMPLETIONS = [
    ["Answer: 7", "Answer: 8", "7 ", "Answer: 77"],
    ["Answer: 21", "Answer: 21", "Answer: 19", "no idea"],
]
REWARDS = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]
LR = 1e-3

# (CoMLRL's advantage_mode, advantage_normalization) -> teamtr's optim settings
MAPPING = {
    "MAGRPO": (("mean", True), {"advantage": "group", "normalize_advantages": True}),
    "MAGRPO, no normalisation": (
        ("mean", False),
        {"advantage": "group", "normalize_advantages": False},
    ),
    "MARLOO (normalised: MAGRPO's)": (
        ("rloo", True),
        {"advantage": "group", "normalize_advantages": True},
    ),
    "MARLOO": (("rloo", False), {"advantage": "leave_one_out", "normalize_advantages": False}),
    "MAREINFORCE (normalised: MAGRPO's)": (
        ("raw", True),
        {"advantage": "group", "normalize_advantages": True},
    ),
    "MAREINFORCE": (("raw", False), {"advantage": "none", "normalize_advantages": False}),
}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network and no wandb run: CoMLRL imports wandb."""
    for key, value in {
        "WANDB_MODE": "disabled",
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("comlrl") / "tiny")


def teamtr_side(model_dir: Path, optim: dict[str, Any], scored: int = 0) -> dict[str, Any]:
    """teamtr's independent learner's update of one agent on the batch; ``scored=-1`` leaves
    each completion's last token out (what CoMLRL's loss scores)."""
    torch.manual_seed(0)
    config = from_dict(
        TrainConfig,
        {
            "schedule": {"learner": "independent", "group_size": G},
            "optim": {
                "lr": LR,
                "epochs": 1,
                "weight_decay": 0.01,
                "max_grad_norm": 1e9,
                "ref_kl_coef": 0.0,
                **optim,
            },
            "trust_region": {"delta_mode": "none"},
        },
    )
    policy = HFPolicy.from_pretrained(model_dir)
    messages, episodes = [], []
    for b, (prompt, texts) in enumerate(zip(PROMPTS, COMPLETIONS)):
        for g, text in enumerate(texts):
            e = b * G + g
            ids = (*policy.codec.completion_ids(text), policy.eos_id)  # as sampled: EOS ends it
            ids = ids[:scored] if scored else ids
            messages.append(MessageRecord(e, b, 0, "solver", prompt, text, ids))
            episodes.append(
                EpisodeRecord(
                    e,
                    b,
                    f"p{b}",
                    prompt,
                    REWARDS[b][g],
                    REWARDS[b][g] == 1.0,
                    None,
                    {},
                    (),
                    1,
                    False,
                )
            )
    stats = RolloutStats(len(episodes), 1, {"solver": 1}, len(messages), 0, 0, 0.0, 0.0)
    batch = RolloutBatch(tuple(messages), tuple(episodes), G, stats)
    msgs, adv = message_advantages(batch, "solver", batch_advantages(batch, config, "solver"))
    logprobs, mask = concat_logprobs(score(policy, msgs, 64, 1.0))
    pg_loss = -(adv * (logprobs * mask).sum(-1)).mean()  # the REINFORCE form of the first step
    initial = [p.detach().clone() for p in policy.parameters()]
    updater = LocalUpdater(policy, config)
    grads = capture_grads(updater.optimizer)
    update_agent(
        policy,
        updater.optimizer,
        msgs,
        adv,
        beta=0.0,
        delta=None,
        optim=config.optim,
        region=config.trust_region,
        temperature=1.0,
    )
    prompt_ids = [policy.codec.prompt_ids(p) for p in PROMPTS]
    completion_ids = [[m.token_ids for m in msgs[b * G : (b + 1) * G]] for b in range(len(PROMPTS))]
    last = logprobs.gather(1, (mask.sum(-1, keepdim=True) - 1)).squeeze(1)  # each last token
    return {
        "advantages": adv.view(len(PROMPTS), G),
        "loss": float(pg_loss),
        "last_token_term": float(-(adv * last).mean()),
        "grads": grads,
        "params": [p.detach().clone() for p in policy.parameters()],
        "initial": initial,
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
    }


def comlrl_side(
    model_dir: Path, mode: str, normalize: bool, data: dict[str, Any]
) -> dict[str, Any]:
    """CoMLRL's MAGRPO update of one agent on the same token ids and returns."""
    import random

    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from comlrl.trainers.reinforce.magrpo import NodeSample
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    random.seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    agent = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, local_files_only=True
    )
    args = MAGRPOConfig(
        num_agents=1,
        agent_learning_rate=LR,
        num_generations=G,
        agent_devices="cpu",
        parallel_training="none",
        num_turns=1,
        advantage_mode=mode,
        advantage_normalization=normalize,
        reference_kl_enabled=False,
        rollout_buffer_size=len(PROMPTS),
        train_batch_size=len(PROMPTS),
        eval_interval=0,
        logging_steps=10_000,
    )
    trainer = MAGRPOTrainer(
        agents=[agent],
        num_agents=1,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS]),
        reward_func=lambda completions, **_: [0.0] * len(completions),
        formatters=[lambda item: item["prompt"]],
        args=args,
        wandb_config=None,
    )
    samples = []
    for b in range(len(PROMPTS)):
        completions_data = {
            "prompt_input_ids": torch.tensor([data["prompt_ids"][b]]),
            "completion_input_ids": [[torch.tensor(ids) for ids in data["completion_ids"][b]]],
        }
        mean = sum(REWARDS[b]) / G
        samples.append(NodeSample(0, 0, completions_data, list(REWARDS[b]), mean, mean, 0))
    advantages = []
    for b in range(len(PROMPTS)):  # CoMLRL's advantage code, then its per-group normalisation
        a = trainer._compute_advantages(torch.tensor(REWARDS[b]))
        if normalize:
            a = (a - a.mean()) / a.std(unbiased=False).clamp(min=1e-6)
        advantages.append(a)
    with torch.no_grad():
        losses = [
            float(trainer._compute_loss_with_gradients(agent, s.completions_data, s.returns))
            for s in samples
        ]
    grads = capture_grads(trainer.optimizers[0])
    trainer._update_from_samples(0, samples)  # one optimizer step over both groups
    return {
        "advantages": torch.stack(advantages),
        "loss": sum(losses) / len(losses),
        "grads": grads,
        "params": [p.detach().clone() for p in agent.parameters()],
    }


def capture_grads(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The gradients the optimizer's (first) step is taken with."""
    seen: list[torch.Tensor] = []

    def hook(opt: torch.optim.Optimizer, *_: Any) -> None:
        if not seen:
            seen.extend(
                p.grad.detach().clone() for group in opt.param_groups for p in group["params"]
            )

    optimizer.register_step_pre_hook(hook)
    return seen


@pytest.mark.parametrize("peer", list(MAPPING))
def test_teamtrs_mapping_equals_comlrls_own_update(model_dir: Path, peer: str) -> None:
    """Equal, once CoMLRL's one difference is taken into account: its loss scores a completion's
    tokens but the last (``_compute_loss_with_gradients`` feeds prompt + completion[:-1] and
    drops the last position's logits too), so teamtr is given the completions without it."""
    (mode, normalize), optim = MAPPING[peer]
    ours = teamtr_side(model_dir, optim, scored=-1)
    # CoMLRL sees the whole completions; it scores all of their tokens but the last
    whole = teamtr_side(model_dir, optim)
    theirs = comlrl_side(model_dir, mode, normalize, whole)
    torch.testing.assert_close(ours["advantages"], theirs["advantages"], rtol=1e-4, atol=1e-5)
    assert math.isclose(ours["loss"], theirs["loss"], rel_tol=1e-4, abs_tol=1e-6)
    assert len(ours["grads"]) == len(theirs["grads"]) > 0
    norm = max(float(g.abs().max()) for g in theirs["grads"])
    assert norm > 0  # a step that moves
    for a, b in zip(ours["grads"], theirs["grads"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6 * norm)
    # AdamW's first step moves an entry by lr x g / (|g| + 1e-8) (and decays it): equal
    # wherever the gradient is clear of that 1e-8 (nearly everywhere), where float noise in a
    # gradient of about 1e-8 cannot flip the step
    clear = total = 0
    for a, b, g in zip(ours["params"], theirs["params"], theirs["grads"]):
        where = g.abs() > 1e-6
        torch.testing.assert_close(a[where], b[where], rtol=0, atol=1e-3 * LR)
        clear, total = clear + int(where.sum()), total + g.numel()
    assert clear > 0.95 * total
    moved = sum(int((a != p).sum()) for a, p in zip(theirs["params"], whole["initial"]))
    assert moved > 0
    # the difference, exactly: teamtr's loss on the whole completions adds the last tokens' term
    assert math.isclose(
        whole["loss"] - theirs["loss"], whole["last_token_term"], rel_tol=1e-3, abs_tol=1e-6
    )
