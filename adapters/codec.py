"""``PromptCodec``: how a backend turns a team context into prompt tokens and sampled tokens into a
message. Shared by the transformers and vLLM backends so both see identical token ids."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from teamtr_core.policy import Completion, Generation


class PromptCodec:
    """Prompt rendering and message finishing for one tokenizer.

    Args:
        tokenizer: a transformers tokenizer.
        max_prompt_tokens: prompts keep their last this many tokens (left truncation: the cue line
            naming the active agent and the latest messages are at the end of a team context).
        chat_template: use the tokenizer's chat template with the context as the user turn
            (``None``: when the tokenizer has one); otherwise plain text with ``<s>`` prepended
            when the tokenizer does not add it.
    """

    def __init__(self, tokenizer: Any, max_prompt_tokens: int, chat_template: bool | None = None):
        has_template = getattr(tokenizer, "chat_template", None) is not None
        self.use_chat_template = has_template if chat_template is None else chat_template
        if self.use_chat_template and not has_template:
            raise ValueError("chat_template=True but the tokenizer has no chat template")
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self.eos_id: int | None = tokenizer.eos_token_id
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.eos_id
        if self.pad_id is None:
            raise ValueError("the tokenizer has neither a pad nor an eos token")

    def prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of ``prompt``, left-truncated to ``max_prompt_tokens``; never empty.

        Lone surrogates (invalid UTF-8) become ``?``; a prompt far longer than the window is first
        cut to its last ``32 * max_prompt_tokens`` characters so tokenising it stays cheap (no
        token spans that many characters, so the kept tokens are unaffected).
        """
        prompt = valid_utf8(prompt[-32 * self.max_prompt_tokens :])
        if self.use_chat_template:
            out = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
            )
            ids = list(out["input_ids"] if isinstance(out, Mapping) else out)
        else:
            ids = list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
            bos = self.tokenizer.bos_token_id
            if bos is not None and (not ids or ids[0] != bos):
                ids = [bos, *ids]
        if not ids:
            ids = [self.eos_id if self.eos_id is not None else self.pad_id]
        return ids[-self.max_prompt_tokens :]

    def completion_ids(self, completion: Completion) -> list[int]:
        """Token ids of a completion: given ids as they are, a string tokenised without specials."""
        if isinstance(completion, str):
            text = valid_utf8(completion)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return [int(t) for t in completion]

    def finish(
        self, new_ids: list[int], stop: tuple[str, ...] = (), *, at_limit: bool = False
    ) -> Generation:
        """The message from sampled token ids: cut after the first EOS (which belongs to the
        message), decode without special tokens, then cut at the first stop string.

        With a stop string, the token ids end at the token that completes it (the policy produced
        those tokens) and the text ends before it.

        ``at_limit``: sampling stopped because it ran out of tokens (the backend's length limit).
        The message is then ``clipped`` unless it holds an EOS or a stop string anyway (one that
        ended exactly at the limit was not cut off).
        """
        ended = False
        if self.eos_id is not None and self.eos_id in new_ids:
            new_ids = new_ids[: new_ids.index(self.eos_id) + 1]
            ended = True
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        hits = [text.find(s) for s in stop if s and s in text]
        if not hits:
            return Generation(text, tuple(new_ids), clipped=at_limit and not ended)
        cut = min(hits)
        for n in range(1, len(new_ids) + 1):
            prefix = self.tokenizer.decode(new_ids[:n], skip_special_tokens=True)
            if any(s in prefix for s in stop if s):
                return Generation(text[:cut], tuple(new_ids[:n]))
        return Generation(text[:cut], tuple(new_ids))


def valid_utf8(text: str) -> str:
    """``text`` with lone surrogates replaced by ``?`` (tokenizers reject invalid UTF-8)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


@functools.lru_cache(maxsize=8)
def prompt_token_counter(folder: str, chat_template: bool | None = None) -> Callable[[str], int]:
    """``count(context) -> tokens`` of a prompt as an HF policy on the model in ``folder``
    renders it (:meth:`PromptCodec.prompt_ids`, its chat template per ``chat_template``), from
    the folder's tokenizer alone (no weights are read). Cached per folder and setting."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    codec = PromptCodec(tokenizer, 1 << 30, chat_template)
    return lambda context: len(codec.prompt_ids(context))
