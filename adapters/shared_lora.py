"""Shared-base LoRA teams: one frozen base model, one LoRA adapter (and optimizer) per agent.

A team of LoRA agents on the same checkpoint usually holds one copy of the base per agent. A
:class:`SharedLoraBase` loads the base once and gives each agent a peft adapter of its own
(``add_adapter`` / ``set_adapter``). Each agent is a :class:`LoraAgentPolicy`: an
:class:`~adapters.hf.HFPolicy` whose ``generate`` and ``logprobs`` run with its adapter active and
whose ``parameters``, ``state_dict``, ``load_state_dict`` and ``save_pretrained`` cover its adapter
only, so its optimizer, checkpoints, resume, swap and weight sync carry the adapter alone.

The numbers are those of a team of separate LoRA copies: the same base weights and the same
adapter weights give the same samples and log-probs (tested), and each agent's update touches
only its own adapter.

Example::

    from adapters.shared_lora import SharedLoraBase
    from teamtr_core.policy import LoraSettings

    base = SharedLoraBase.from_pretrained("models/tiny")
    solver = base.add_agent("solver", lora=LoraSettings(r=8))
    critic = base.add_agent("critic", adapter_path="adapters/critic")

Team configs say ``shared_base: true`` (:mod:`adapters.team`): the ``hf`` agents with LoRA on the
same model directory, device and dtype then share one base.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from adapters.hf import DType, HFPolicy, load_pretrained, lora_config
from teamtr_core.policy import LoraSettings

#: peft names an adapter's module with the adapter's name; these are the names it accepts here.
_ADAPTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
#: The suffix of the frozen adapter that holds an agent's reference policy.
REFERENCE_SUFFIX = "__reference"


class SharedLoraBase:
    """One frozen base model shared by several agents, each with its own LoRA adapter.

    Args:
        model: a transformers causal LM (not yet wrapped by peft); its weights are frozen.
        tokenizer: its tokenizer.
        device: where to put the model (``None``: where it is).
        **policy_kwargs: passed to every agent's :class:`~adapters.hf.HFPolicy` view
            (``micro_batch_size``, ``max_prompt_tokens``, ``chat_template``, ``shared_prefix``).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | torch.device | None = None,
        **policy_kwargs: Any,
    ) -> None:
        self.model: Any = model if device is None else model.to(device)
        self.tokenizer = tokenizer
        self.policy_kwargs = policy_kwargs
        self.agents: dict[str, LoraAgentPolicy] = {}
        self.active: str | None = None
        self._trainable: dict[str, bool] = {}
        self._params: dict[str, list[torch.nn.Parameter]] = {}  # each adapter's, in model order

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, device: str = "cpu", dtype: DType = "float32", **kwargs: Any
    ) -> SharedLoraBase:
        """Loads a local model directory once (offline), as ``HFPolicy.from_pretrained`` does."""
        model, tokenizer = load_pretrained(path, dtype)
        return cls(model, tokenizer, device=device, **kwargs)

    # -- adapters -------------------------------------------------------------------------------
    def add_agent(
        self,
        name: str,
        *,
        lora: LoraSettings | None = None,
        adapter_path: str | Path | None = None,
        **policy_kwargs: Any,
    ) -> LoraAgentPolicy:
        """A new agent on this base: fresh adapters (``lora``) or a saved adapter
        (``adapter_path``, trainable). ``policy_kwargs`` override the base's for this agent.

        Raises:
            ValueError: a name that is taken or that peft cannot use, or not exactly one of
                ``lora`` and ``adapter_path``.
        """
        self._add_adapter(name, lora, adapter_path, trainable=True)
        view = LoraAgentPolicy(self, name, **{**self.policy_kwargs, **policy_kwargs})
        self.agents[name] = view
        return view

    def _add_adapter(
        self,
        name: str,
        lora: LoraSettings | None,
        adapter_path: str | Path | None,
        trainable: bool,
    ) -> None:
        if not _ADAPTER_NAME.match(name):
            raise ValueError(
                f"adapter name {name!r}: use letters, digits, '_' and '-' (peft names modules by it)"
            )
        if name in self._trainable:
            raise ValueError(f"this base already has an adapter {name!r}")
        if (lora is None) == (adapter_path is None):
            raise ValueError(f"agent {name!r}: give exactly one of lora and adapter_path")
        from peft import PeftModel, get_peft_model

        model = self.model
        if adapter_path is not None:
            if isinstance(model, PeftModel):
                model.load_adapter(str(adapter_path), adapter_name=name, is_trainable=trainable)
            else:
                model = PeftModel.from_pretrained(
                    model, str(adapter_path), adapter_name=name, is_trainable=trainable
                )
        elif isinstance(model, PeftModel):
            model.add_adapter(name, lora_config(lora))  # type: ignore[arg-type]
        else:
            model = get_peft_model(model, lora_config(lora), adapter_name=name)  # type: ignore[arg-type]
        self.model = model
        self._added(name, trainable)
        self.activate(name)

    def _added(self, name: str, trainable: bool) -> None:
        """Records a new adapter: whether it trains, and its parameters (found once here, not
        at every switch of adapter)."""
        self._trainable[name] = trainable
        self._params[name] = [p for n, p in self.model.named_parameters() if _adapter_of(n) == name]
        self.active = None

    def activate(self, name: str) -> None:
        """Makes ``name``'s adapter the one the model runs. peft's ``set_adapter`` freezes the
        other adapters; every agent's adapter is made trainable again (reference adapters stay
        frozen), so an optimizer's parameters keep their gradients whichever agent ran last."""
        if name == self.active:
            return
        self.model.set_adapter(name)
        for adapter, trainable in self._trainable.items():
            for param in self.adapter_parameters(adapter):
                param.requires_grad_(trainable)
        self.active = name

    def adapter_parameters(self, name: str) -> list[torch.nn.Parameter]:
        """The parameters of ``name``'s adapter (in the model's order)."""
        return self._params[name]

    def reference_of(self, agent: LoraAgentPolicy) -> LoraAgentPolicy:
        """A frozen adapter with ``agent``'s current weights, on this base (the agent's reference
        policy, where a separate team would deep-copy the whole model)."""
        from peft import PeftModel

        name = agent.adapter + REFERENCE_SUFFIX
        assert isinstance(self.model, PeftModel)
        if name not in self._trainable:  # its weights are overwritten: keep torch's RNG as is
            with torch.random.fork_rng(devices=[]):
                self.model.add_adapter(name, self.model.peft_config[agent.adapter])
            self._added(name, trainable=False)
        view = LoraAgentPolicy(self, name, **agent.view_kwargs)
        view.load_state_dict(agent.state_dict())
        return view

    # -- sizes ------------------------------------------------------------------------------------
    def param_bytes(self) -> dict[str, int]:
        """Bytes of parameters: ``base`` (frozen, held once), ``adapters`` (all), ``total``."""
        base = adapters = 0
        for n, p in self.model.named_parameters():
            size = p.numel() * p.element_size()
            if _adapter_of(n) is None:
                base += size
            else:
                adapters += size
        return {"base": base, "adapters": adapters, "total": base + adapters}


class LoraAgentPolicy(HFPolicy):
    """One agent of a :class:`SharedLoraBase`: an ``HFPolicy`` over the shared model that runs
    with its own adapter active and whose parameters and state are its adapter's only."""

    def __init__(self, base: SharedLoraBase, adapter: str, **policy_kwargs: Any) -> None:
        super().__init__(base.model, base.tokenizer, **policy_kwargs)
        self.base, self.adapter = base, adapter
        self.view_kwargs = policy_kwargs

    @property
    def is_lora(self) -> bool:
        return True

    def merge_lora(self) -> None:
        raise ValueError(
            f"merge_lora: agent {self.adapter!r} shares its base with other agents; merging would "
            "change theirs too. Save its adapter (save_pretrained) and merge a separate copy."
        )

    def frozen_copy(self) -> LoraAgentPolicy:
        """This agent's reference policy: a frozen adapter on the same base."""
        return self.base.reference_of(self)

    # -- the Policy protocol, with this agent's adapter active ----------------------------------------
    def generate(self, prompts: Any, sampling: Any) -> Any:
        self.base.activate(self.adapter)
        return super().generate(prompts, sampling)

    def logprobs(self, prompts: Any, completions: Any, *, temperature: float = 1.0) -> Any:
        self.base.activate(self.adapter)
        return super().logprobs(prompts, completions, temperature=temperature)

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """This agent's adapter parameters (whichever adapter is active)."""
        return iter(self.base.adapter_parameters(self.adapter))

    def state_dict(self) -> Mapping[str, Any]:
        """This agent's adapter weights, in peft's saved-adapter naming (no adapter name)."""
        from peft import get_peft_model_state_dict

        return dict(get_peft_model_state_dict(self.base.model, adapter_name=self.adapter))

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        """Loads adapter weights (as :meth:`state_dict` gives them) into this agent's adapter.

        Raises:
            KeyError: ``state`` lacks some of the adapter's weights, or has others (e.g. a whole
                model's state).
        """
        from peft import set_peft_model_state_dict

        expected = set(self.state_dict())
        missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
        if missing or extra:
            raise KeyError(
                f"adapter {self.adapter!r}: {len(missing)} weights missing (e.g. {missing[:2]}), "
                f"{len(extra)} unexpected (e.g. {extra[:2]}); is this an adapter-only state?"
            )
        return set_peft_model_state_dict(self.base.model, dict(state), adapter_name=self.adapter)

    def save_pretrained(self, path: str | Path) -> None:
        """Saves this agent's adapter (``adapter_config.json``, ``adapter_model.safetensors``)
        and the tokenizer: ``HFPolicy.from_pretrained(base, adapter_path=path)`` or
        ``SharedLoraBase.add_agent(name, adapter_path=path)`` load it."""
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.base.model.peft_config[self.adapter].save_pretrained(str(path))
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(path / "adapter_model.safetensors"), metadata={"format": "pt"})
        self.tokenizer.save_pretrained(str(path))


def _adapter_of(param_name: str) -> str | None:
    """The adapter a parameter belongs to (``...lora_A.<adapter>.weight``), else ``None``."""
    parts = param_name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.startswith("lora_"):
            return parts[i + 1]
    return None
