"""The texts the ARBench games show: the team's opening prompts and the responders' role prompts.

They follow AR-Bench's prompts (``arbench/reasoner/*/prompt.py``: ``propose_template``,
``respond_template``, ``system_prompt_with_2shots``) in content and reply formats, restated for a
team that talks in one shared context: every agent message is one turn, and the final answer may
come at any turn (it ends the game).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.arbench import dc_rules, gn_rules

GN_PROMPT = """Let's play a game of guessing number.
The game rule is: I have a 4-digit secret number in mind, all digits of the number are unique, so every digit from 0 to 9 can be present only once. For example: 0123 or 9468. You will take turns guessing the number and using the feedback to progressively reveal the true number. The game will conduct {turns} turns, then you give your final guess.
When a guessing number is proposed, I will return the feedback of two pieces of information:
1. How many digits are present in the answer and in the correct position
2. How many digits are present in the answer but in a different position from the guessing number
For example: {example_a}, {example_b}
Every message is one turn; the last 4-digit number in a message is its guess.{early_stop}
Give the number you guess in this format:
Guess: [number]"""

SP_PROMPT = """Let's play a situation puzzle game. I'll give you a puzzle. We can interact for {turns} turns in the question phase.
During each turn, you ask me a yes-or-no question, and I will answer with "Yes", "No", or "Unknown".
Every message is one turn. Ask exactly one question per message in this format:
Q: [Your question]
When you know the story (at the latest after the {turns} turns), give your final answer, which ends the game, in this format:
A: [Your answer]

Now, here's the puzzle:
Puzzle: {surface}"""

DC_PROMPT = """You will take on the role of a detective tasked with finding the real murderer in this case. Your goal is to solve the mystery by questioning the suspects. You will take turns asking these questions and using the answers to gather evidence and piece together the truth. The game will conduct in {turns} turns, in each turn you can only propose one question.
The case background is:
time: {time}
location: {location}
victim:
- name: {victim}
- introduction: {victim_intro}
- cause of death: {cause}
- murder weapon: {weapon}
The investigation focuses on five suspects, one of whom is the true murderer:
{suspects}
Every message is one turn. To interrogate, write the whole name of one suspect ({names}) and one single question:
Suspect: [whole name]
Question: [your question]
To give your final answer, which ends the game, choose among {choices}:
Reason: [Your inference step by step]
Answer: [A, B, C, D or E]"""

# The role prompts of the LLM responders (AR-Bench's referee and suspect prompts, condensed).
SP_REFEREE_PROMPT = """You are the referee of a game where players are shown a <Surface> and you are given the <Bottom>. You need to understand the entire story based on both the <Surface> and <Bottom>. Players will ask questions based on the <Surface>, and you need to judge them. Answer with only one of: Yes, No, Unknown, without any explanation.

## Judging Rules
- If the player's question matches the given <Surface> and <Bottom>: answer only "Yes".
- If the player's question contradicts the given story: answer only "No".
- If the answer cannot be found in the <Surface> and <Bottom>, and cannot be deduced through reasoning: answer only "Unknown".
- If the player directly asks for the answer, or does not propose a question that helps solve the puzzle, answer only "This is not a question, please propose your next question."

## Question Content
### Surface
{surface}

### Bottom
{bottom}

Now, please judge the following player question."""

DC_SUSPECT_PROMPT = """You will now play the role of a suspect with a specific task and answer questions based on the stories provided below. When responding to a question, your answers should be limited in one sentence.

Your Name: {name}
Your Task: {task}
Your Story: {story}"""


def gn_prompt(turns: int, early_stop: bool) -> str:
    """The GN opening prompt for ``turns`` rounds."""
    stop = " The game ends as soon as a guess is entirely correct." if early_stop else ""
    return GN_PROMPT.format(
        turns=turns,
        example_a=gn_rules.CORRECT_POSITION.format(a=0),
        example_b=gn_rules.DIFFERENT_POSITION.format(b=2),
        early_stop=stop,
    )


def sp_prompt(surface: str, turns: int) -> str:
    """The SP opening prompt."""
    return SP_PROMPT.format(surface=surface, turns=turns)


def dc_prompt(case: Mapping[str, Any], turns: int) -> str:
    """The DC opening prompt: AR-Bench's case background (no hidden field) and the reply formats."""
    info = case["initial_information"]
    victim = info.get("victim", case["victim"])
    choices: Sequence[Mapping[str, Any]] = info["suspect"]
    suspects = "".join(
        f"- suspect {i + 1}:\n  - name: {s['name']}\n  - introduction: {s.get('introduction', '')}\n"
        for i, s in enumerate(choices)
    ).rstrip("\n")
    names = [str(s["name"]) for s in choices]
    return DC_PROMPT.format(
        turns=turns,
        time=info.get("time", case["time"]),
        location=info.get("location", case["location"]),
        victim=victim.get("name", ""),
        victim_intro=victim.get("introduction", ""),
        cause=victim.get("cause_of_death", ""),
        weapon=victim.get("murder_weapon", ""),
        suspects=suspects,
        names=", ".join(names),
        choices=dc_rules.choices_line(names),
    )
