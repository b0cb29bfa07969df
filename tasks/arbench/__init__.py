"""AR-Bench (tmlr-group/AR-Bench) active-reasoning games as interactive team tasks.

* ``teamtr/ARBench-GN-v0``: :class:`GuessingNumbersTask` (fully rule-based);
* ``teamtr/ARBench-SP-v0``: :class:`SituationPuzzleTask` (a referee answers yes/no questions);
* ``teamtr/ARBench-DC-v0``: :class:`DetectiveCaseTask` (suspects answer an interrogation).

The referee and the suspects are pluggable :class:`Responder` objects: the offline
:class:`ScriptedResponder` by default, or :class:`PolicyResponder` around any project policy.
"""

from tasks.arbench.data import ArbenchDataError
from tasks.arbench.dc import DetectiveCaseTask
from tasks.arbench.gn import GuessingNumbersTask
from tasks.arbench.responders import PolicyResponder, Responder, ScriptedResponder
from tasks.arbench.sp import SituationPuzzleTask

__all__ = [
    "ArbenchDataError",
    "DetectiveCaseTask",
    "GuessingNumbersTask",
    "PolicyResponder",
    "Responder",
    "ScriptedResponder",
    "SituationPuzzleTask",
]
