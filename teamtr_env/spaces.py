"""Gymnasium spaces for text observations and actions."""

from __future__ import annotations

import string
import unicodedata
from typing import Any

from gymnasium.spaces import Text

# What random samples are drawn from: printable ASCII plus a few non-ASCII letters and symbols, so
# sampled actions exercise Unicode handling. Membership (``contains``) is wider: see UnicodeText.
SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n" + "éßøπ→∑中文"
_ALLOWED_CONTROLS = frozenset("\n\t")
_FORBIDDEN = frozenset({"Cc", "Cs"})  # control characters, lone surrogates


class UnicodeText(Text):
    """A ``Text`` space that contains any Unicode string of bounded length without control
    characters (other than newline and tab) or lone surrogates.

    Gymnasium's ``Text.contains`` accepts only characters of the sampling charset, but the shared
    context of an LLM team holds arbitrary Unicode. Sampling still draws from ``charset``.
    """

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        return all(c in _ALLOWED_CONTROLS or unicodedata.category(c) not in _FORBIDDEN for c in x)
