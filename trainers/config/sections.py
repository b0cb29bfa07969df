"""The sections of a training configuration (``schedule``, ``trust_region``, ``optim``,
``runner``, ``rollout``, ``eval``, ``diagnostics``): typed, frozen dataclasses, each
checking its own fields. :class:`trainers.config.TrainConfig` holds them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from teamtr_core.choices import choice_errors
from teamtr_core.policy import SamplingParams

_RUN_SAMPLING = SamplingParams(max_new_tokens=12)  # the demo's messages are short

Order = Literal["fixed", "reverse", "random"]
RlLrSchedule = Literal["constant", "linear", "cosine"]
LoggerName = Literal["tensorboard", "wandb", "mlflow"]
DeltaMode = Literal["fixed", "adaptive", "none"]
SnapshotDevice = Literal["same", "cpu"]
Budget = Literal["disjoint", "matched", "per_sample"]
DiagnosticsLevel = Literal["off", "cheap", "full"]
OccupancyFeatures = Literal["auto", "hash", "task"]
AdvantageEstimator = Literal["group", "leave_one_out", "none"]
AdvantageStd = Literal["population", "unbiased"]
RatioLevel = Literal["message", "token"]
"""How group advantages are estimated (:func:`trainers.optim.advantages.group_advantages`)."""


def _help(text: str, default: Any) -> Any:
    return field(default=default, metadata={"help": text})


@dataclass(frozen=True)
class ScheduleConfig:
    """Which learner, in which order, on how many rollouts."""

    learner: str = field(
        default="teamtr/TeamTR-v0",
        metadata={
            "help": "the learner: a registered id (teamtr/TeamTR-v0: fresh rollouts under the "
            "partially updated team before every agent update; teamtr/NaiveSequential-v0: "
            "stage-start rollouts reused for every update; teamtr/Joint-v0: all agents on one "
            "batch; plugins: `teamtr learners`) or a built-in's short name (teamtr, "
            "naive_sequential, joint)",
        },
    )
    stages: int = _help("training stages (each updates every agent once)", 8)
    order: Order = _help(
        "update order per stage: fixed, reverse, or random (reseeded per stage)", "fixed"
    )
    problems_per_batch: int = _help(
        "B: prompts per update (tiny models need large batches: the team reward is a noisy signal "
        "for any one agent)",
        64,
    )
    group_size: int = _help("G: rollouts per prompt (the advantage group)", 4)
    budget: Budget = _help(
        "disjoint: every update gets its own B prompts x G rollouts (single-batch methods sample "
        "n*B prompts at the stage start and update agent i on the i-th disjoint slice), so data, "
        "gradient work and tokens per update are equal and only staleness differs; matched: "
        "a batch that serves several updates has as many rollouts (B per update) and every "
        "agent is updated on all of it; per_sample: every sampling event uses B prompts",
        "disjoint",
    )

    max_stage_episodes: int = _help(
        "refuse a run whose learner would sample more episodes than this in one stage (its "
        "estimate: n x B x G for the sequential learners, B x turns x G for at_grpo's tree); "
        "every episode's records stay in memory until the stage's updates",
        100_000,
    )

    # A learner's own settings moved to its section (``learner_options``; ``^``: from the top).
    _renamed_keys: ClassVar[dict[str, str]] = {
        "method": "learner",
        "resample_every": "^learner_options.resample_every",
        "importance_weighting": "^learner_options.importance_weighting",
        "tree_trust_region": "^learner_options.trust_region",
    }

    def batch_prompts(self, covered: int) -> int:
        """Prompts of one batch that serves ``covered`` updates, by ``budget`` (the one place
        it is read for sizes): ``disjoint`` and ``matched``, B per update it serves (disjoint:
        each update gets its own slice; matched: every update is on all of it); ``per_sample``,
        B."""
        b = self.problems_per_batch
        return b * covered if self.budget in ("disjoint", "matched") else b

    def sliced(self, covered: int) -> bool:
        """A batch that serves ``covered`` updates gives each its own slice (``disjoint``)."""
        return self.budget == "disjoint" and covered > 1

    def __post_init__(self) -> None:
        errors = []
        names = (
            "stages",
            "problems_per_batch",
            "group_size",
            "max_stage_episodes",
        )
        for name in names:
            if getattr(self, name) < 1:
                errors.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class TrustRegionConfig:
    """The per-agent token-level KL trust region (Eq. 18) and how it is enforced."""

    delta: float = _help(
        "trust-region radius delta_i on the monitored token KL (the paper: 0.01 for LLMs; the "
        "tiny demo models move further per useful step)",
        0.05,
    )
    delta_mode: DeltaMode = _help(
        "fixed: constant delta; adaptive: grow x1.5 (up to delta_max) after updates using < half "
        "of it, shrink /1.5 (down to delta_min) after backtracking; none: no trust region",
        "fixed",
    )
    delta_min: float = _help("lower bound of the adaptive delta", 0.002)
    delta_max: float = _help("upper bound of the adaptive delta", 0.05)
    beta: float = _help("initial KL-penalty coefficient (Eq. 17)", 0.1)
    adapt_beta: bool = _help(
        "adapt beta on the kept (post-backtracking) KL: double it when an update is reverted, "
        "halve it when the kept step used < delta / 2, never below beta_min",
        True,
    )
    beta_min: float | None = _help(
        "the floor of the adaptive beta (null: beta / 32, five halvings below the initial "
        "beta); without one, a radius that no step reaches halved beta after every update",
        None,
    )
    max_backtracks: int = _help(
        "halvings of the step toward the old parameters before reverting", 6
    )
    monitor_subsample: float = _help(
        "fraction of token positions the KL monitor reads (unbiased)", 1.0
    )
    monitor_messages: float = _help(
        "fraction of the agent's messages the post-update KL check scores (a seeded uniform "
        "subset, the same for every backtrack): unbiased, and the check costs this fraction of a "
        "forward pass; see benchmarks/update_speed.py for its decision flip rate",
        1.0,
    )
    monitor_without_region: bool = _help(
        "with no trust region (delta_mode none, or a learner that updates without one), still "
        "score the updated policy once per update, so that kl_raw says how far the step went; "
        "false skips that forward pass and logs NaN for the KL and surrogate",
        True,
    )
    snapshot_device: SnapshotDevice = _help(
        "where an update keeps its one snapshot of the trainable parameters and optimizer state "
        "(taken only with a trust region, to backtrack and revert): same (the parameters' "
        "device) or cpu (the host: a GPU run keeps its device memory, at a copy's transfer)",
        "same",
    )

    @property
    def beta_floor(self) -> float:
        """The lowest value the adaptive beta takes: ``beta_min``, or ``beta / 32``."""
        return self.beta / 32 if self.beta_min is None else self.beta_min

    def __post_init__(self) -> None:
        errors = []
        if self.delta <= 0:
            errors.append(f"delta must be > 0, got {self.delta}")
        if not 0 < self.delta_min <= self.delta_max:
            errors.append("need 0 < delta_min <= delta_max")
        if self.beta < 0 or self.max_backtracks < 0:
            errors.append("beta and max_backtracks must be >= 0")
        if self.beta_min is not None and not 0 <= self.beta_min <= self.beta:
            errors.append(f"beta_min must be in [0, beta = {self.beta}], got {self.beta_min}")
        if not 0 < self.monitor_subsample <= 1:
            errors.append(f"monitor_subsample must be in (0, 1], got {self.monitor_subsample}")
        if not 0 < self.monitor_messages <= 1:
            errors.append(f"monitor_messages must be in (0, 1], got {self.monitor_messages}")
        errors += choice_errors("snapshot_device", self.snapshot_device, SnapshotDevice)
        if errors:
            raise ValueError("; ".join(errors))


REWARD_WEIGHT_MIN = 1e-6
REWARD_WEIGHT_MAX = 1e6
"""The range of a non-zero reward weight: the squared deviations of mixed rewards stay far
inside float32 (about 3.4e38), and a weight does not vanish beside a reward of order 1."""


@dataclass(frozen=True)
class RewardConfig:
    """What each agent learns from: ``team`` x the team reward + ``local`` x the agent's local
    reward, from a task that gives local rewards (:class:`tasks.SupportsLocalRewards`;
    docs/rewards.md). The default (1, 0) is the team reward alone, as in the paper; evaluation
    always reports the team's metrics."""

    team: float = _help("weight of the team reward every agent shares", 1.0)
    local: float = _help(
        "weight of the agent's own local reward (0 = off; needs a task that gives local rewards)",
        0.0,
    )

    def __post_init__(self) -> None:
        errors = []
        for name in ("team", "local"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(f"reward.{name} must be a number, got {value!r}")
            elif not math.isfinite(value) or value < 0:
                errors.append(f"reward.{name} must be a finite number >= 0, got {value}")
            elif value != 0 and not REWARD_WEIGHT_MIN <= value <= REWARD_WEIGHT_MAX:
                errors.append(
                    f"reward.{name} must be 0 or between {REWARD_WEIGHT_MIN:g} and "
                    f"{REWARD_WEIGHT_MAX:g}, got {value:g}: rewards are mixed and standardised in "
                    "float32, where a larger weight overflows (zero or NaN advantages) and a "
                    "smaller one vanishes; only the ratio of the two weights matters to "
                    "group-standardised advantages"
                )
        if not errors and self.team == 0 and self.local == 0:
            errors.append("reward: team and local are both 0: the agents would learn from nothing")
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class OptimConfig:
    """The per-agent policy update (clipped surrogate + KL penalty, Adam)."""

    lr: float = _help(
        "AdamW learning rate (the demo's tiny models: 1e-4, whose raw steps mostly land inside "
        "the trust region; at 1e-3 nearly every step needs backtracking)",
        1e-4,
    )
    epochs: int = _help("full-batch gradient steps per agent update", 4)
    micro_batch_size: int = _help("messages per forward pass (gradients are accumulated)", 64)
    ratio_clip: float = _help("epsilon of the clipped message-level ratio", 0.2)
    a_clip: float | None = _help("hard clip of standardised advantages (null = none)", 5.0)
    eps_std: float = _help("epsilon inside the group standard deviation", 1e-6)
    normalize_advantages: bool = _help("group-standardise advantages (ablation: false)", True)
    advantage: AdvantageEstimator = _help(
        "the advantage baseline every learner uses: group (the group mean: GRPO, CoMLRL's "
        "MAGRPO), leave_one_out (the other rollouts' mean: RLOO, MARLOO) or none (REINFORCE, "
        "MAREINFORCE)",
        "group",
    )
    advantage_std: AdvantageStd = _help(
        "the group spread advantages are divided by: population (sqrt(var + eps_std), the "
        "paper's Eq. E.1) or unbiased (std with G - 1, plus eps_std: verl's GRPO, as PettingLLMs "
        "runs AT-GRPO)",
        "population",
    )
    ratio_level: RatioLevel = _help(
        "message: one ratio per message (a product over its tokens), clipped per message, loss "
        "averaged over messages (the paper's Eq. 17); token: a ratio per token, clipped per "
        "token, loss averaged over the batch's tokens (verl's token-mean, PettingLLMs' AT-GRPO); "
        "the KL terms stay averaged over messages",
        "message",
    )
    dual_clip: float | None = _help(
        "ratio_level token: dual-clip PPO's cap c > 1 on a negative-advantage token's loss "
        "(verl's clip_ratio_c, 3 in PettingLLMs); null = none",
        None,
    )
    max_grad_norm: float = _help("gradient clipping", 1.0)
    weight_decay: float = _help("AdamW weight decay", 0.0)
    lr_schedule: RlLrSchedule = _help(
        "the learning rate over the stages after the warm-up: constant, or a linear or cosine "
        "decay toward 0 (reached just after the last stage)",
        "constant",
    )
    warmup_stages: int = _help(
        "linear warm-up: stage s < warmup_stages runs at lr * (s + 1) / (warmup_stages + 1)", 0
    )
    autocast: Literal["none", "bf16"] = _help(
        "bf16: the update's forward passes run under bfloat16 autocast (on GPU: faster, less "
        "memory; log-probs stay float32); none: full precision",
        "none",
    )
    gradient_checkpointing: bool = _help(
        "recompute activations in the backward pass (less memory for long contexts, about one "
        "more forward pass of compute); transformers policies only",
        False,
    )
    ref_kl_coef: float = _help(
        "coefficient of a KL penalty toward a frozen reference policy (each agent's parameters "
        "when training starts, after behaviour cloning), beside the trust region; 0 = none. Costs "
        "a copy of each agent's parameters and one forward pass per update",
        0.0,
    )

    def __post_init__(self) -> None:
        errors = []
        if self.lr <= 0 or self.epochs < 1 or self.micro_batch_size < 1 or self.ratio_clip <= 0:
            errors.append("need lr > 0, epochs >= 1, micro_batch_size >= 1, ratio_clip > 0")
        errors += choice_errors("lr_schedule", self.lr_schedule, RlLrSchedule)
        errors += choice_errors("advantage", self.advantage, AdvantageEstimator)
        errors += choice_errors("advantage_std", self.advantage_std, AdvantageStd)
        errors += choice_errors("ratio_level", self.ratio_level, RatioLevel)
        if self.dual_clip is not None and not self.dual_clip > 1:
            errors.append(f"dual_clip must be > 1 or null, got {self.dual_clip}")
        if self.dual_clip is not None and self.ratio_level != "token":
            errors.append("dual_clip applies to ratio_level: token only")
        errors += choice_errors("autocast", self.autocast, Literal["none", "bf16"])
        if self.warmup_stages < 0:
            errors.append(f"warmup_stages must be >= 0, got {self.warmup_stages}")
        if self.ref_kl_coef < 0:
            errors.append(f"ref_kl_coef must be >= 0, got {self.ref_kl_coef}")
        if errors:
            raise ValueError("; ".join(errors))

    def lr_at(self, stage: int, stages: int) -> float:
        """The learning rate of stage ``stage`` (0-based) of ``stages``: the warm-up, then the
        schedule's decay over the stages after it."""
        if stage < self.warmup_stages:
            return self.lr * (stage + 1) / (self.warmup_stages + 1)
        if self.lr_schedule == "constant":
            return self.lr
        span = max(stages - self.warmup_stages, 1)
        progress = min((stage - self.warmup_stages) / span, 1.0)
        if self.lr_schedule == "linear":
            return self.lr * (1.0 - progress)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class RunnerConfig:
    """Where the run runs, the one placement section: the rollouts (this process, or Ray rollout
    workers) and each trainable agent's model and updates (this process, or an agent actor per
    trainable agent on Ray), on one Ray cluster (``pip install -e ".[ray]"``)."""

    backend: Literal["local", "ray"] = _help(
        "where rollouts are played. local: in this process; ray: RayRunner workers (each a "
        "replica of every agent's policy, weights synced after every update)",
        "local",
    )
    workers: int = _help(
        "Ray rollout workers; each training batch is split into this many blocks", 2
    )
    address: str | None = _help(
        "the Ray cluster the rollout workers and agent actors join (e.g. 'auto' or "
        "'ray://head:10001'); null starts a local Ray",
        None,
    )
    num_cpus: float = _help("CPUs each Ray rollout worker asks for", 1.0)
    num_gpus: float = _help(
        "GPUs each Ray rollout worker asks for (1 for HF-on-GPU or vLLM replicas)", 0.0
    )
    agents: Literal["local", "ray"] = _help(
        "where each trainable agent's model lives and is updated. local: in this process; ray: "
        "one agent actor per trainable agent (its model, optimizer state and trust-region "
        "backtracking live there; the driver orchestrates)",
        "local",
    )
    agent_shards: int = _help(
        "ranks each trainable agent is sharded over (FSDP2): with runner.agents: ray, a gang of "
        "this many agent actors in one placement group, each holding 1/N of the agent's weights, "
        "gradients and optimizer state (agent_cpus and agent_gpus each); 1: one actor holds it "
        "all. For full-weight agents bigger than one device",
        1,
    )
    agent_cpus: float = _help("CPUs each agent actor asks for", 1.0)
    agent_gpus: float = _help("GPUs each agent actor asks for (1: its model trains on a GPU)", 0.0)
    max_restarts: int = _help(
        "how many times a stage is replayed from the last checkpoint after an agent actor died, "
        "in the whole run, before the run stops",
        3,
    )
    check_memory: bool = _help(
        "refuse, before anything is written, a run whose memory plan (teamtr plan) does not fit "
        "this machine's devices; false: run anyway (not checked with agent actors on a remote "
        "cluster)",
        True,
    )

    def __post_init__(self) -> None:
        errors = choice_errors("backend", self.backend, Literal["local", "ray"])
        errors += choice_errors("agents", self.agents, Literal["local", "ray"])
        if self.workers < 1:
            errors.append(f"workers must be >= 1, got {self.workers}")
        if min(self.num_cpus, self.num_gpus, self.agent_cpus, self.agent_gpus) < 0:
            errors.append("num_cpus, num_gpus, agent_cpus and agent_gpus must be >= 0")
        if self.max_restarts < 0:
            errors.append(f"max_restarts must be >= 0, got {self.max_restarts}")
        if self.agent_shards < 1:
            errors.append(f"agent_shards must be >= 1, got {self.agent_shards}")
        elif self.agent_shards > 1 and self.agents != "ray":
            errors.append(
                f"agent_shards: {self.agent_shards} needs agents: ray (a sharded agent is a gang "
                "of agent actors): set runner.agents=ray"
            )
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class RolloutConfig:
    """What samples each trainable agent's rollouts (training, diagnostic and evaluation
    batches): its own transformers model, or a vLLM engine that gets the trainer's weights after
    every accepted update (docs/policies.md, "Training with vLLM rollouts"). The updates run in
    transformers either way, in the driver or in the agent's agent actor."""

    engine: Literal["hf", "vllm"] = _help(
        "hf: HFPolicy.generate; vllm: a vLLM engine per agent (one per base model for a "
        "shared_base LoRA team, each agent's adapter served from it)",
        "hf",
    )
    in_process: bool = _help(
        "run the engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, what a colocated "
        "trainer uses) instead of vLLM's default engine process",
        False,
    )
    kv_cache_gib: float = _help(
        "a CPU engine's KV cache in GiB (VLLM_CPU_KVCACHE_SPACE; unused on a GPU)", 1.0
    )
    gpu_memory_utilization: float = _help(
        "a GPU engine's share of the GPU's memory (leave room for the trainer's model)", 0.3
    )
    max_model_len: int | None = _help(
        "the engine's context window (null: the model's); prompts and messages must fit", None
    )
    importance_correction: Literal["none", "tis"] = _help(
        "tis: weight each message by min(pi_trainer / pi_engine, tis_cap), the truncated "
        "importance correction of the engine-trainer mismatch (veRL's and TRL's TIS); the trust "
        "region's surrogate estimate uses the same weights. none: off (the default)",
        "none",
    )
    tis_cap: float = _help("the truncation of the tis weights (>= 1)", 2.0)

    @property
    def tis(self) -> float | None:
        """The truncation of the importance correction, or ``None`` when it is off."""
        return self.tis_cap if self.importance_correction == "tis" else None

    def __post_init__(self) -> None:
        errors = choice_errors("engine", self.engine, Literal["hf", "vllm"])
        errors += choice_errors(
            "importance_correction", self.importance_correction, Literal["none", "tis"]
        )
        if self.tis_cap < 1:
            errors.append(f"tis_cap must be >= 1, got {self.tis_cap}")
        if self.kv_cache_gib <= 0:
            errors.append(f"kv_cache_gib must be > 0, got {self.kv_cache_gib}")
        if not 0 < self.gpu_memory_utilization <= 1:
            errors.append(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation before and after training (and every ``every`` stages when > 0)."""

    problems: int = _help(
        "distinct problems per evaluation (generated tasks: drawn from the split's partition; a "
        "smaller split gives all it has, and the summary says so). The demo's held-out split has "
        "363 chains: 400 evaluates all of them",
        400,
    )
    k: int = _help("samples per problem (pass@k, avg@k)", 4)
    every: int = _help(
        "also evaluate on the validation split every this many stages (0 = before and after only)",
        0,
    )
    split: Literal["test", "validation"] = _help(
        "split of the before/after evaluation (tasks with a 'split' option; never 'train')", "test"
    )
    train_distribution: bool = _help(
        "also evaluate before/after on fresh draws of the training split (the RL objective; keys "
        "train_eval/...), next to the held-out split",
        True,
    )
    select: Literal["last", "best_validation"] = _help(
        "which stage's team the final evaluation uses: the last, or the best validation avg@K "
        "(needs every >= 1; model selection never looks at the test split)",
        "last",
    )
    early_stop_patience: int = _help(
        "stop the run when validation avg@K has not improved for this many periodic "
        "evaluations (needs every >= 1; 0 = never)",
        0,
    )

    def __post_init__(self) -> None:
        errors = []
        if self.problems < 1 or self.k < 1 or self.every < 0:
            errors.append("eval needs problems >= 1, k >= 1 and every >= 0")
        if self.select == "best_validation" and self.every < 1:
            errors.append("eval.select 'best_validation' needs eval.every >= 1")
        if self.early_stop_patience < 0 or (self.early_stop_patience and self.every < 1):
            errors.append("eval.early_stop_patience needs eval.every >= 1 (and must be >= 0)")
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class DiagnosticsConfig:
    """The paper's diagnostics in every run (docs/diagnostics.md): what is computed, and how.

    ``level``: ``off`` computes nothing; ``cheap`` computes what the training data already holds
    (zeta proxies, importance-weight tails, the certificate, KL-monitor flip rates, and D_occ for
    learners that sample the intermediate teams); ``full`` adds batches outside the training
    budget: the stale gap with its noise floor, D_occ of every learner with intermediate teams
    (with its noise floor), and the measured improvement J(after) - J(before) with the violation
    rate and rank correlation of the certificate across stages. A bare string is the level
    (``diagnostics: full``); ``true``/``false`` are the old spelling of ``full``/``off``.
    """

    level: DiagnosticsLevel = _help(
        "off: nothing; cheap: from the training data only; full: plus independent batches "
        "outside the budget (stale gap, D_occ of every learner, measured improvement)",
        "cheap",
    )
    occupancy: OccupancyFeatures = _help(
        "the state featurisation of D_occ: task (the task's exact state_key, e.g. the relay's "
        "observed symbol), hash (a hashed bucket of the rendered context), auto (task when the "
        "task has a state_key, else hash); the turn is always part of the state",
        "auto",
    )
    buckets: int = _help(
        "hash buckets of the rendered contexts (occupancy: hash); fewer buckets lower the "
        "sampling noise of the TV and merge more states",
        256,
    )
    flip_trials: int = _help(
        "subsamples per update for the KL-monitor flip rates at 25% and 50% (App. G.4)", 100
    )
    gamma: float | None = _help(
        "the certificate's discount; null = 1 - 1/T for a T-turn episode (so 1/(1-gamma) = T)",
        None,
    )
    a_max: float = _help("the certificate's advantage bound A_max (rewards in [0, 1]: 1)", 1.0)
    hoeffding: bool = _help(
        "subtract the App. E.3 finite-sample correction from the certificate", False
    )
    confidence: float = _help("1 - delta_conf of the App. E.3 correction", 0.95)
    eval_problems: int = _help(
        "prompts (x group_size rollouts) of each batch that measures J before and after a stage "
        "(full; 0 = schedule.problems_per_batch)",
        0,
    )

    def __post_init__(self) -> None:
        errors = []
        if self.buckets < 2:
            errors.append(f"diagnostics.buckets must be >= 2, got {self.buckets}")
        if self.flip_trials < 1:
            errors.append(f"diagnostics.flip_trials must be >= 1, got {self.flip_trials}")
        if self.gamma is not None and not 0 < self.gamma < 1:
            errors.append(f"diagnostics.gamma must be in (0, 1) or null, got {self.gamma}")
        if not self.a_max > 0:
            errors.append(f"diagnostics.a_max must be > 0, got {self.a_max}")
        if not 0 < self.confidence < 1:
            errors.append(f"diagnostics.confidence must be in (0, 1), got {self.confidence}")
        if self.eval_problems < 0:
            errors.append(f"diagnostics.eval_problems must be >= 0, got {self.eval_problems}")
        if errors:
            raise ValueError("; ".join(errors))

    @property
    def cheap(self) -> bool:
        """Anything is computed (``cheap`` or ``full``)."""
        return self.level != "off"

    @property
    def full(self) -> bool:
        """The independent batches outside the budget are sampled."""
        return self.level == "full"
