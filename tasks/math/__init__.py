"""``teamtr/Math-v0``: generated algebra, MATH-500 and AIME, graded by math-verify."""

from tasks.math.extract import Extraction, extract_answer, last_boxed
from tasks.math.generate import GENERATORS, Generated
from tasks.math.grading import grade_answer
from tasks.math.loader import load_math_file
from tasks.math.task import MathTask
from tasks.math.verifier import Verdict, VerifierPool, verify_answer

__all__ = [
    "GENERATORS",
    "Extraction",
    "Generated",
    "MathTask",
    "Verdict",
    "VerifierPool",
    "extract_answer",
    "grade_answer",
    "last_boxed",
    "load_math_file",
    "verify_answer",
]
