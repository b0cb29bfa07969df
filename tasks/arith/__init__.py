"""``teamtr/Arith-v0``: generated integer arithmetic with an exact verifier."""

from tasks.arith.rules import evaluate, extract_answer, parse_expression
from tasks.arith.task import ArithTask

__all__ = ["ArithTask", "evaluate", "extract_answer", "parse_expression"]
