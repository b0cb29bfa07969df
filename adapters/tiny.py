"""Tiny local models: a character-level tokenizer and a small Llama, built and saved offline.

``build_tiny_model(path)`` writes a model directory that ``HFPolicy.from_pretrained(path)`` (and
``transformers.AutoModelForCausalLM`` / ``AutoTokenizer``) load with no network, so tests and the CPU
demo exercise the same loading path as a real checkpoint.

Why a Llama config: with transformers 5.x a Qwen2 config paired with a custom tokenizer swaps in
Qwen's byte-level pre-tokenizer and silently drops spaces.
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass
from pathlib import Path

#: The default character set: printable ASCII with newline and tab (vertical tab, form feed and
#: carriage return are left out). Anything else maps to ``<unk>``.
DEFAULT_CHARSET = "".join(c for c in string.printable if c not in "\x0b\x0c\r")
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0, 1, 2, 3


@dataclass(frozen=True)
class TinyModelSpec:
    """Size of a tiny Llama (defaults: about 0.55M parameters).

    Attributes:
        hidden_size: model width.
        num_layers: transformer blocks.
        num_heads: attention heads (``hidden_size`` must be divisible by it).
        intermediate_size: MLP width.
        max_positions: the context window in tokens (= characters).
        charset: the characters that get their own token.
        seed: initialisation seed.
    """

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 1024
    charset: str = DEFAULT_CHARSET
    seed: int = 0

    def __post_init__(self) -> None:
        errors = []
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if getattr(self, name) < 1:
                errors.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_heads >= 1 and self.hidden_size % self.num_heads:
            errors.append(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )
        if self.max_positions < 16:
            errors.append(f"max_positions must be >= 16, got {self.max_positions}")
        if len(set(self.charset)) != len(self.charset) or not self.charset:
            errors.append("charset must be a non-empty string without repeated characters")
        if errors:
            raise ValueError("Invalid TinyModelSpec: " + "; ".join(errors))


def build_char_tokenizer(charset: str = DEFAULT_CHARSET):  # -> PreTrainedTokenizerFast
    """A character-level ``PreTrainedTokenizerFast``: one token per character of ``charset``, the
    four special tokens ``<pad> <s> </s> <unk>``, unknown characters -> ``<unk>``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *charset])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()  # join characters without separators
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=10**9,
    )


def build_tiny_model(path: str | Path, spec: TinyModelSpec | None = None) -> Path:
    """Builds a randomly initialised tiny Llama with a character tokenizer and saves both to
    ``path`` with ``save_pretrained`` (no network).

    Returns:
        The directory, loadable with ``HFPolicy.from_pretrained(path)``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = spec or TinyModelSpec()
    tokenizer = build_char_tokenizer(spec.charset)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "teamtr_tiny.json").write_text(_spec_json(spec), encoding="utf-8")
    return out


def _spec_json(spec: TinyModelSpec) -> str:
    import json

    return json.dumps(asdict(spec), indent=2)
