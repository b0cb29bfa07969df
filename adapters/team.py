"""Team configs: which backend, model, LoRA adapter and sampling each agent uses.

A team config is a YAML or JSON file validated against the schema generated from
:class:`TeamConfig` (every problem reported at once)::

    sampling: {temperature: 0.8, max_new_tokens: 48}
    default: {backend: hf, path: models/tiny}        # agents not listed below
    agents:
      solver: {backend: hf, path: models/solver, lora: {r: 8}}
      critic: {backend: hf, path: models/critic, adapter_path: adapters/critic}
      aggregator: {backend: scripted, error_rate: 0.1, sampling: {temperature: 0.5}}

Relative paths are resolved against the config file's folder. Each agent gets its own parameter
set (heterogeneous sizes are fine); ``build_team`` returns the policies and per-agent sampling.
With ``shared_base: true``, the ``hf`` LoRA agents on the same model directory, device and dtype
share one frozen base, each with its own adapter (:mod:`adapters.shared_lora`)::

    shared_base: true
    default: {backend: hf, path: models/qwen-7b, lora: {r: 16}}   # one base, an adapter each

With ``shared_policy: true`` (role-sharing, AT-GRPO's term) one policy plays every agent: one
model and, in training, one optimizer, updated by every agent's updates. Every agent's policy
config must then be the same apart from its ``sampling``::

    shared_policy: true
    default: {backend: hf, path: models/tiny}                     # one model plays every seat

Every ``sampling`` section is a :class:`~teamtr_core.policy.SamplingParams`, and an agent's
section inherits each key it does not set from the team's (and, inside a training config, the
team's from the run's). The per-agent keys ``temperature`` / ``max_new_tokens`` of earlier
versions are refused, each with an error naming its new key (``sampling.temperature`` /
``sampling.max_new_tokens``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from adapters.availability import VLLM_INSTALL, missing_package
from adapters.fetch import MODELS
from adapters.gguf import gguf_path_errors, is_gguf_path
from tasks.capabilities import no_expert_reason
from teamtr_core.config import from_dict, inherit, load_config
from teamtr_core.errors import ConfigError
from teamtr_core.policy import LoraSettings, Policy, SamplingParams
from teamtr_core.seeds import seed_errors
from teamtr_core.team import Slot, Team

Backend = Literal["hf", "vllm", "scripted", "random", "constant", "tabular"]
_MODEL_BACKENDS = ("hf", "vllm")
#: The largest table (states x messages) a ``tabular`` agent may hold (float64, with AdamW's two
#: moments: about 24 MB each).
MAX_TABLE_ENTRIES = 1_000_000


def sampling_errors(value: Any) -> list[str]:
    """The field check of a config's ``sampling`` section: ``seed`` is the runner's, per call."""
    if isinstance(value, Mapping) and value.get("seed") is not None:
        return ["seed: the runner derives a seed per call from the run's seed; remove it"]
    return []


@dataclass(frozen=True)
class AgentPolicyConfig:
    """One agent's policy.

    ``backend``: ``hf`` (transformers, CPU/GPU, trainable), ``vllm`` (GPU rollouts), ``scripted``
    (the task's expert), ``random`` or ``constant`` (model-free baselines and tests), ``tabular``
    (an exact softmax table per agent over the task's states and messages, trainable:
    :class:`~adapters.tabular.TabularPolicy`; ``states``/``messages`` default to the task's
    ``tabular_states()``/``tabular_messages()``, ``init`` and ``seed`` draw the table).
    """

    backend: Backend = field(
        default="hf", metadata={"help": "hf | vllm | scripted | random | constant | tabular"}
    )
    path: str | None = field(
        default=None, metadata={"help": "model directory, or a .gguf file (hf, vllm)"}
    )
    adapter_path: str | None = field(default=None, metadata={"help": "saved LoRA adapter to load"})
    lora: LoraSettings | None = field(default=None, metadata={"help": "fresh LoRA adapters"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda, cuda:1, ..."})
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    micro_batch_size: int = field(default=64, metadata={"help": "prompts per forward pass"})
    max_prompt_tokens: int | None = field(default=None, metadata={"help": "left-truncation budget"})
    chat_template: bool | None = field(default=None, metadata={"help": "null: when available"})
    error_rate: float = field(
        default=0.0, metadata={"help": "scripted expert error rate, in [0, 1]"}
    )
    text: str = field(default="", metadata={"help": "the constant backend's reply"})
    seed: int = field(
        default=0,
        metadata={
            "help": "seed of model-free policies (tabular: of the table)",
            "check": seed_errors,
        },
    )
    states: list[str] | None = field(
        default=None, metadata={"help": "tabular: the table's states (null: the task's)"}
    )
    messages: list[str] | None = field(
        default=None, metadata={"help": "tabular: the table's messages (null: the task's)"}
    )
    init: Literal["uniform", "random"] = field(
        default="uniform",
        metadata={"help": "tabular: zero logits, or standard normal ones drawn from the seed"},
    )
    sampling: SamplingParams | None = field(
        default=None,
        metadata={
            "help": "this agent's sampling; keys it leaves out come from the team's sampling "
            "(null = the team's)",
            "check": sampling_errors,
        },
    )

    _renamed_keys: ClassVar[dict[str, str]] = {
        "temperature": "sampling.temperature",
        "max_new_tokens": "sampling.max_new_tokens",
    }


@dataclass(frozen=True)
class TeamConfig:
    """Every agent's policy and the team's sampling parameters."""

    agents: dict[str, AgentPolicyConfig] = field(
        default_factory=dict, metadata={"help": "agent name -> policy"}
    )
    default: AgentPolicyConfig | None = field(
        default=None, metadata={"help": "policy of agents not listed in 'agents'"}
    )
    sampling: SamplingParams | None = field(
        default=None,
        metadata={
            "help": "the team's sampling; keys it leaves out come from the training run's "
            "sampling inside a training config, else from the defaults (null = those)",
            "check": sampling_errors,
        },
    )
    shared_base: bool = field(
        default=False,
        metadata={
            "help": "hf agents with LoRA (lora or adapter_path) on the same path, device and "
            "dtype share one frozen base model, each with its own adapter"
        },
    )
    shared_policy: bool = field(
        default=False,
        metadata={
            "help": "role-sharing: one policy (one model, and one optimizer in training) plays "
            "every agent; the agents' configs must be the same apart from sampling"
        },
    )

    def slots(self, agents: Sequence[str]) -> list[tuple[str, ...]]:
        """Which of ``agents`` play one policy: the slots :func:`build_team` builds (every
        agent one of its own, or with ``shared_policy`` one of them all). What reads a team
        config without its policies (the memory plan, the run's checks) asks this."""
        if self.shared_policy and agents:
            return [tuple(agents)]
        return [(agent,) for agent in agents]

    @staticmethod
    def _prepare_config(data: dict[str, Any]) -> None:
        """Each agent's ``sampling`` section inherits the keys it leaves out from the team's."""
        own = data.get("sampling")
        team = inherit(None, own, SamplingParams()) if isinstance(own, dict) else None
        agents = data.get("agents")
        sections = [data.get("default"), *(agents.values() if isinstance(agents, dict) else ())]
        for agent in sections:
            if isinstance(agent, dict) and isinstance(agent.get("sampling"), dict):
                agent["sampling"] = inherit(team, agent["sampling"], SamplingParams())


def load_team_config(path: str | Path, overrides: Sequence[str] = ()) -> TeamConfig:
    """Reads a YAML/JSON team config; relative model paths become relative to its folder."""
    config = load_config(TeamConfig, path, overrides)
    return resolve_paths(config, Path(path).resolve().parent)


def team_config_from_dict(data: Mapping[str, Any], base: str | Path = ".") -> TeamConfig:
    """Validates a team config given as a dict (paths relative to ``base``)."""
    return resolve_paths(from_dict(TeamConfig, data, what="team config"), Path(base).resolve())


def resolve_paths(config: TeamConfig, base: Path) -> TeamConfig:
    def fix(agent: AgentPolicyConfig | None) -> AgentPolicyConfig | None:
        if agent is None:
            return None
        paths: dict[str, Any] = {
            name: str(base / value)
            for name in ("path", "adapter_path")
            if (value := getattr(agent, name)) is not None and not Path(value).is_absolute()
        }
        return replace(agent, **paths)

    agents = {name: fix(a) for name, a in config.agents.items()}
    return replace(config, agents=agents, default=fix(config.default))  # type: ignore[arg-type]


def check_team(
    config: TeamConfig, agents: Sequence[str], task: Any = None, *, model_folders: bool = True
) -> dict[str, AgentPolicyConfig]:
    """Each environment agent's policy config; raises ``ConfigError`` listing every problem of
    the config with this team at once: agents missing or extra, model paths, ``error_rate``
    outside [0, 1] and (with ``task``) ``scripted`` agents of a task without a scripted expert.
    (A file's syntax and types are checked when it is loaded, before this.) With
    ``model_folders=False`` a model path (other than a ``.gguf`` file) need not be a folder here
    (``teamtr plan``, which reads only sizes, resolves it in its own way)."""
    errors = []
    extra = [name for name in config.agents if name not in agents]
    if extra:
        errors.append(f"agents {extra} are not on the team {list(agents)}")
    chosen: dict[str, AgentPolicyConfig] = {}
    for name in agents:
        agent = config.agents.get(name, config.default)
        if agent is None:
            errors.append(f"agent {name!r} has no policy: add agents.{name} or a 'default'")
            continue
        chosen[name] = agent
        if agent.backend in _MODEL_BACKENDS and not agent.path:
            errors.append(f"agents.{name}: backend {agent.backend!r} needs 'path'")
        if agent.backend == "vllm" and missing_package("vllm"):
            errors.append(
                f"agents.{name}: backend 'vllm' needs vLLM, not installed here: {VLLM_INSTALL}"
            )
        if agent.backend in _MODEL_BACKENDS and agent.path:
            if is_gguf_path(agent.path):  # converted once into a cache when built (adapters.gguf)
                errors += [f"agents.{name}.path: {e}" for e in gguf_path_errors(agent.path)]
            elif model_folders and not Path(agent.path).is_dir():
                errors.append(
                    f"agents.{name}.path: {agent.path} is not a directory: give a local model "
                    "folder (its config.json, tokenizer and weights; nothing is downloaded)"
                    + _fetch_hint(agent.path)
                )
        if agent.backend not in _MODEL_BACKENDS and (agent.lora or agent.adapter_path):
            errors.append(f"agents.{name}: lora/adapter_path need backend 'hf' or 'vllm'")
        if agent.backend == "vllm" and agent.adapter_path and not config.shared_base:
            errors.append(
                f"agents.{name}: backend 'vllm' serves a saved adapter (adapter_path) from the "
                "one multi-LoRA engine of shared_base: true; set shared_base: true (or merge the "
                "adapter into a model folder: teamtr export --merge)"
            )
        if config.shared_base and agent.backend == "hf" and agent.lora and agent.adapter_path:
            errors.append(
                f"agents.{name}: with shared_base, give lora (fresh adapters) or adapter_path "
                "(a saved one), not both"
            )
        if agent.backend == "tabular":
            errors += _tabular_errors(name, agent, task)
        elif agent.states is not None or agent.messages is not None:
            errors.append(f"agents.{name}: states/messages need backend 'tabular'")
        if not 0 <= agent.error_rate <= 1:
            errors.append(f"agents.{name}.error_rate: must be in [0, 1], got {agent.error_rate}")
        if agent.backend == "scripted" and task is not None and not _has_expert(task):
            errors.append(
                f"agents.{name}: backend 'scripted' needs a task with a scripted expert: "
                f"{no_expert_reason(task)}"
            )
    if config.shared_policy:
        errors += _shared_policy_errors(config, chosen)
    if errors:
        raise ConfigError("team config", errors)
    return chosen


def _shared_policy_errors(config: TeamConfig, chosen: Mapping[str, AgentPolicyConfig]) -> list[str]:
    """What stops one policy from playing every agent: ``shared_base`` beside it (one policy
    has one set of weights, no adapters to share a base between), and agents whose policy
    configs differ in more than their ``sampling``."""
    errors = []
    if config.shared_base:
        errors.append(
            "shared_policy and shared_base: one policy plays every agent, so there are no "
            "adapters to share a base between; keep one of them"
        )
    if not chosen:
        return errors
    first, *rest = chosen
    model = replace(chosen[first], sampling=None)
    differ = [name for name in rest if replace(chosen[name], sampling=None) != model]
    if differ:
        errors.append(
            f"shared_policy: one policy plays every agent, but the configs of {differ} differ "
            f"from {first!r}'s in more than sampling; give every agent the same policy (a "
            "'default', with per-agent sampling sections if needed)"
        )
    return errors


def _has_expert(task: Any) -> bool:
    return callable(getattr(task, "expert_reply", None))


def _tabular_errors(name: str, agent: AgentPolicyConfig, task: Any) -> list[str]:
    """What stops ``agent`` (``backend: tabular``) from getting a table: no states or messages
    (given, or from a task that declares them), or a table over :data:`MAX_TABLE_ENTRIES`."""
    if task is None and (agent.states is None or agent.messages is None):
        return []  # checked again with the task when the team is built
    states, messages = tabular_space(agent, task)
    if states is None or messages is None:
        return [
            f"agents.{name}: backend 'tabular' needs states and messages; give them, or use a "
            f"task that declares them (tabular_states, tabular_messages): "
            f"{getattr(task, 'name', task)!r} does not"
        ]
    errors = [
        f"agents.{name}.{what}: must be non-empty and distinct ({len(xs)} given, "
        f"{len(set(xs))} distinct)"
        for what, xs in (("states", states), ("messages", messages))
        if not xs or len(set(xs)) != len(xs)
    ]
    size = len(states) * len(messages)
    if size > MAX_TABLE_ENTRIES:
        errors.append(
            f"agents.{name}: a table of {len(states):,} states x {len(messages):,} messages "
            f"({size:,} entries) is over the limit of {MAX_TABLE_ENTRIES:,}; choose a smaller "
            "game (teamtr/Convention-v0: length 2)"
        )
    return errors


def tabular_space(agent: AgentPolicyConfig, task: Any) -> tuple[list[str] | None, list[str] | None]:
    """A ``tabular`` agent's states and messages: its config's, else the task's."""
    states = agent.states
    if states is None and callable(getattr(task, "tabular_states", None)):
        states = list(task.tabular_states())
    messages = agent.messages
    if messages is None and callable(getattr(task, "tabular_messages", None)):
        messages = list(task.tabular_messages())
    return states, messages


def _tabular_policy(agent: AgentPolicyConfig, task: Any) -> Policy:
    """A ``tabular`` agent's table. Its seed is the agent's ``seed`` plus a draw from the torch
    generator, which ``build_team(init_seed=...)`` seeds per agent (so every run seed gives
    every agent its own random table, as fresh LoRA adapters are drawn)."""
    import torch

    from adapters.tabular import TabularPolicy

    states, messages = tabular_space(agent, task)
    if states is None or messages is None:
        raise ConfigError("team config", _tabular_errors("?", agent, task))
    featurize = getattr(task, "tabular_state", None)
    draw = int(torch.randint(2**31 - 1, ()).item())
    return cast(
        Policy,
        TabularPolicy(
            states,
            messages,
            featurize=featurize if callable(featurize) else None,
            init=agent.init,
            seed=agent.seed + draw,
        ),
    )


def build_policy(agent: AgentPolicyConfig, task: Any = None) -> Policy:
    """Instantiates one agent's policy (model backends import torch only here)."""
    if agent.backend == "hf":
        from adapters.hf import HFPolicy

        return HFPolicy.from_pretrained(
            agent.path,  # type: ignore[arg-type]
            device=agent.device,
            dtype=agent.dtype,
            adapter_path=agent.adapter_path,
            lora=agent.lora,
            micro_batch_size=agent.micro_batch_size,
            max_prompt_tokens=agent.max_prompt_tokens,
            chat_template=agent.chat_template,
        )
    if agent.backend == "vllm":
        from adapters.vllm_policy import VLLMPolicy

        return VLLMPolicy(
            agent.path,  # type: ignore[arg-type]
            max_prompt_tokens=agent.max_prompt_tokens,
            chat_template=agent.chat_template,
            dtype=agent.dtype,
            seed=agent.seed,
        )
    if agent.backend == "tabular":
        return _tabular_policy(agent, task)
    from adapters.scripted import ConstantPolicy, RandomPolicy, ScriptedExpert

    if agent.backend == "scripted":
        return ScriptedExpert(task, error_rate=agent.error_rate, seed=agent.seed)
    if agent.backend == "random":
        return RandomPolicy(seed=agent.seed)
    return ConstantPolicy(agent.text)


def build_team(
    config: TeamConfig,
    agents: Sequence[str],
    task: Any = None,
    *,
    only: Sequence[str] | None = None,
    init_seed: int | None = None,
    **sampling_overrides: Any,
) -> tuple[Team, dict[str, SamplingParams]]:
    """Policies and sampling parameters for every agent of a team: the policies as a
    :class:`~teamtr_core.team.Team` (a mapping ``agent -> policy`` whose slots say which agents
    play one policy: every agent in a slot of its own, or with ``shared_policy`` one slot).

    Args:
        config: the team config.
        agents: the environment's agent names (``env.possible_agents``).
        task: the task (needed by ``scripted`` agents).
        only: build these agents' policies alone (an agent actor builds its own agent's);
            the sampling parameters are still every agent's. With ``shared_policy``, the one
            policy is built once and every agent's entry is that object.
        init_seed: draw each agent's fresh weights (new LoRA adapters) from its own seed,
            ``derive_seed(init_seed, position in agents)``, so an agent built alone starts as it
            does in the whole team; ``None``: from the global torch generator.
        **sampling_overrides: e.g. ``temperature=1.0`` from the command line (``None`` = unset).

    Raises:
        ConfigError: listing every problem with the config for this team.
    """
    chosen = check_team(config, agents, task)
    if only is not None:
        chosen = {name: agent for name, agent in chosen.items() if name in only}
    bases: dict[tuple[str, str, str], Any] = {}
    if config.shared_base:  # a vLLM engine is started for its agents' largest adapter rank
        engines = [
            (k, a) for a in chosen.values() if a.backend == "vllm" and (k := shared_base_key(a))
        ]
        for key, agent in engines:
            if key not in bases:
                rank = max(_adapter_rank(other) for k, other in engines if k == key)
                bases[key] = _shared_base(agent, rank)
    slots: list[Slot] = []
    for group in config.slots([a for a in agents if a in chosen]):
        first = group[0]  # the slot's policy is built from its first agent's config, once
        position = 0 if config.shared_policy else list(agents).index(first)
        with _init_rng(init_seed, position):
            policy = build_agent(config, first, chosen[first], task, bases)
            slots.append(Slot(policy, group, chosen[first]))
    team = Team(slots, [a for a in agents if a in chosen])
    return team, team_sampling(config, agents, **sampling_overrides)


@contextlib.contextmanager
def _init_rng(seed: int | None, position: int) -> Iterator[None]:
    """The global torch generator seeded for one agent's fresh weights (restored after);
    nothing when ``seed`` is ``None``."""
    if seed is None:
        yield
        return
    import torch

    from teamtr_core.seeds import derive_seed

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, position))
        yield


def build_agent(
    config: TeamConfig,
    name: str,
    agent: AgentPolicyConfig,
    task: Any = None,
    bases: dict[tuple[str, str, str], Any] | None = None,
) -> Policy:
    """Agent ``name``'s policy as ``build_team`` builds it. With ``config.shared_base``, an
    ``hf`` LoRA agent is an adapter on the :class:`~adapters.shared_lora.SharedLoraBase` in
    ``bases`` that its model directory, device and dtype name, and a ``vllm`` agent is served
    by the one :class:`~adapters.vllm_policy.VLLMLoraTeam` engine of its model directory (with
    its ``adapter_path``, or the base alone); a missing base or engine is made and added to
    ``bases``. Otherwise :func:`build_policy`."""
    key = shared_base_key(agent) if config.shared_base else None
    if key is None:
        return build_policy(agent, task)
    bases = {} if bases is None else bases
    if key not in bases:
        bases[key] = _shared_base(agent)
    if agent.backend == "vllm":
        return cast(Policy, bases[key].agent(name, agent.adapter_path))
    return cast(
        Policy,
        bases[key].add_agent(
            name,
            lora=agent.lora,
            adapter_path=agent.adapter_path,
            micro_batch_size=agent.micro_batch_size,
            max_prompt_tokens=agent.max_prompt_tokens,
            chat_template=agent.chat_template,
        ),
    )


def _shared_base(agent: AgentPolicyConfig, rank: int = 0) -> Any:
    """The base model (``hf``) or the multi-LoRA engine (``vllm``, serving adapters up to
    ``rank``, at least 16) that ``agent`` starts."""
    assert agent.path is not None
    if agent.backend == "vllm":
        import tempfile

        from adapters.vllm_policy import VLLMLoraTeam

        return VLLMLoraTeam(
            agent.path,
            adapter_dir=tempfile.mkdtemp(prefix="teamtr-vllm-adapters-"),
            max_lora_rank=max(16, rank, _adapter_rank(agent)),
            max_prompt_tokens=agent.max_prompt_tokens,
            chat_template=agent.chat_template,
            dtype=agent.dtype,
            seed=agent.seed,
        )
    from adapters.shared_lora import SharedLoraBase

    return SharedLoraBase.from_pretrained(agent.path, device=agent.device, dtype=agent.dtype)


def _adapter_rank(agent: AgentPolicyConfig) -> int:
    """The rank in a saved adapter's ``adapter_config.json`` (0: none or unreadable)."""
    if agent.adapter_path is None:
        return 0
    try:
        data = json.loads((Path(agent.adapter_path) / "adapter_config.json").read_text())
        return int(data.get("r", 0))
    except (OSError, ValueError, TypeError):
        return 0


def shared_base_key(agent: AgentPolicyConfig) -> tuple[str, str, str] | None:
    """The base an agent shares under ``shared_base: true`` (backend, model directory, and for
    ``hf`` device and dtype), or ``None``: it keeps a model of its own (a model-free backend,
    or an ``hf`` agent without LoRA: fully fine-tuning it would change the others' base)."""
    if agent.backend not in _MODEL_BACKENDS or agent.path is None:
        return None
    path = str(Path(agent.path).resolve())
    if agent.backend == "vllm":
        return ("vllm", path, agent.dtype)
    if agent.lora is None and agent.adapter_path is None:
        return None
    return (path, agent.device, agent.dtype)


def team_sampling(
    config: TeamConfig,
    agents: Sequence[str],
    base: SamplingParams | None = None,
    **sampling_overrides: Any,
) -> dict[str, SamplingParams]:
    """Every agent's sampling parameters. Builds no policy.

    An agent samples with its own ``sampling``, else the team's, else ``base`` (a training run's
    ``sampling``), else the defaults; ``sampling_overrides`` (e.g. ``temperature=1.0`` from the
    command line; ``None`` = unset) replace single keys of all of them.

    Raises:
        ConfigError: listing every problem with the config for this team, or with the overrides.
    """
    chosen = check_team(config, agents)
    return {
        name: (agent.sampling or config.sampling or base or SamplingParams()).updated(
            **sampling_overrides
        )
        for name, agent in chosen.items()
    }


def _fetch_hint(path: str) -> str:
    """How to get a missing model folder named after a model ``teamtr models get`` knows."""
    name = Path(path).name
    if name in MODELS:
        return f"; fetch it with `teamtr models get {name} --out {path}`"
    return ""
