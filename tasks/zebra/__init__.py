"""``teamtr/ZebraLogic-v0``: ZebraLogic grid-mode logic puzzles with the ZeroEval verifier.

Pure rules live apart from the plugin: ``puzzle`` (data model, clue semantics, text), ``solver``
(SAT encoding, python-sat), ``generate`` (Algorithm 1), ``textparse`` (text back to a puzzle),
``grading`` (ZeroEval's parsing and cell grading, per-size summaries), ``data`` (file loading),
``expert`` (the scripted expert's pure parts); ``task`` is the plugin.
"""

from tasks.zebra.generate import generate_puzzle
from tasks.zebra.grading import aggregate, extract_last_complete_json, grade_grid, size_bucket
from tasks.zebra.puzzle import Clue, ClueKind, Entity, Puzzle, render_puzzle
from tasks.zebra.solver import ClueSolver, solve_puzzle
from tasks.zebra.task import ZebraTask
from tasks.zebra.textparse import parse_puzzle

__all__ = [
    "Clue",
    "ClueKind",
    "ClueSolver",
    "Entity",
    "Puzzle",
    "ZebraTask",
    "aggregate",
    "extract_last_complete_json",
    "generate_puzzle",
    "grade_grid",
    "parse_puzzle",
    "render_puzzle",
    "size_bucket",
    "solve_puzzle",
]
