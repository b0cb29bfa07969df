"""A tiny GGUF file written by the ``gguf`` package itself, as llama.cpp's converter writes one:
a random Llama (grouped-query attention, tied embeddings) with its Q/K weights permuted to
llama.cpp's rotary layout, a byte-level BPE tokenizer (256 byte tokens, a few merges, ChatML's
control tokens) and a chat template. transformers reads it back as it reads SmolLM2's, so the fast
tests need no download."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant"
    "\n' }}{% endif %}"
)
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2, as in SmolLM2
MERGES = ("Ġ t", "h e", "Ġt he", "i n", "a n", "Ġ a", "e r", "1 2")


def byte_level_vocab() -> tuple[list[str], list[int], list[str]]:
    """Tokens, their GGUF token types (3: control, 1: normal) and the merges."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    spelling = bytes_to_unicode()
    tokens = [*SPECIAL, *(spelling[b] for b in range(256))]
    tokens += ["".join(m.split(" ")) for m in MERGES]
    types = [3] * len(SPECIAL) + [1] * (len(tokens) - len(SPECIAL))
    return tokens, types, list(MERGES)


def tiny_llama(vocab_size: int, seed: int = 0) -> Any:
    """A random tiny ``LlamaForCausalLM`` (2 layers, width 64, 4 query and 2 key/value heads)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,  # rope theta: Llama's default, 10000, as the file says
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        for param in model.parameters():  # larger weights than the init: logits that differ
            param.data.normal_(0.0, 0.2)
    return model.eval()


def _permute(weights: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """llama.cpp's Q/K reordering (convert_hf_to_gguf.py, LlamaModel.permute)."""
    if n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_tiny_gguf(
    path: Path,
    *,
    quant: Literal["F32", "Q4_1"] = "F32",
    seed: int = 0,
    architecture: str = "llama",
) -> tuple[Path, Any]:
    """Writes a tiny Llama as a GGUF file (``quant``: its matrices in float32 or Q4_1, the type
    of SmolLM2's file; norms stay float32) and returns the path and the model it holds.
    ``architecture`` is written as ``general.architecture`` (another name: a file transformers
    cannot read)."""
    import gguf

    tokens, types, merges = byte_level_vocab()
    model = tiny_llama(len(tokens), seed)
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), architecture)  # writes general.architecture
    writer.add_name("Teamtr Tiny Llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_vocab_size(cfg.vocab_size)
    qtype = gguf.GGMLQuantizationType[quant]
    writer.add_file_type(0 if quant == "F32" else 3)  # llama.cpp's ftype: ALL_F32, MOSTLY_Q4_1
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight":  # tied: llama.cpp writes no output.weight
            continue
        stem, suffix = hf_name.rsplit(".", 1)
        name = f"{names.get_name(stem)}.{suffix}"
        data = tensor.detach().float().numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _permute(data, heads, heads)
        elif hf_name.endswith("k_proj.weight"):
            data = _permute(data, heads, kv_heads)
        if data.ndim == 2 and quant != "F32":
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, model
