"""``teamtr/Relay-v0``: a secret passed along a relay of agents (an exact team game)."""

from tasks.relay.rules import observed_symbol, parse_message, render_message, render_prompt
from tasks.relay.task import RelayTask

__all__ = ["RelayTask", "observed_symbol", "parse_message", "render_message", "render_prompt"]
