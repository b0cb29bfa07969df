"""The reasoning-gym datasets teamtr registers, without importing reasoning-gym.

``teamtr tasks`` and the registry list these names at start-up, so the catalogue is a static table
taken from reasoning-gym 0.1.25 (``reasoning_gym.factory.DATASETS``; a test checks it against the
installed library). reasoning-gym itself is imported only when one of its environments is made.
"""

from __future__ import annotations

REASONING_GYM_VERSION = "0.1.25"
"""The reasoning-gym release the catalogue was taken from (the ``reasoning-gym`` extra pins it)."""

INSTALL = "pip install -e '.[reasoning-gym]'"
"""How to install the optional dependency."""

CATALOGUE: dict[str, tuple[str, int, bool]] = {
    "ab": ("algorithmic", 4, True),
    "acre": ("induction", 0, True),
    "advanced_geometry": ("geometry", 4, True),
    "aiw": ("logic", 9, True),
    "arc_1d": ("arc", 4, True),
    "arc_agi": ("arc", 4, True),
    "base_conversion": ("algorithmic", 5, True),
    "basic_arithmetic": ("arithmetic", 5, True),
    "bf": ("code", 3, True),
    "binary_alternation": ("algorithmic", 4, True),
    "binary_matrix": ("algorithmic", 4, True),
    "bitwise_arithmetic": ("arithmetic", 10, True),
    "boxnet": ("games", 9, False),
    "caesar_cipher": ("algorithmic", 4, True),
    "calendar_arithmetic": ("arithmetic", 4, True),
    "chain_sum": ("arithmetic", 11, True),
    "circuit_logic": ("logic", 5, True),
    "codeio": ("code", 4, True),
    "coin_flip": ("probability", 13, True),
    "color_cube_rotation": ("cognition", 5, True),
    "complex_arithmetic": ("algebra", 4, True),
    "composite": ("composite", 0, True),
    "count_bits": ("arithmetic", 5, True),
    "count_primes": ("algorithmic", 5, True),
    "countdown": ("games", 5, True),
    "course_schedule": ("graphs", 5, True),
    "cryptarithm": ("algorithmic", 4, True),
    "decimal_arithmetic": ("arithmetic", 4, True),
    "decimal_chain_sum": ("arithmetic", 5, True),
    "dice": ("arithmetic", 4, True),
    "emoji_mystery": ("games", 6, True),
    "family_relationships": ("graphs", 9, True),
    "figlet_font": ("cognition", 6, True),
    "fraction_simplification": ("arithmetic", 4, True),
    "futoshiki": ("games", 4, True),
    "game_of_life": ("algorithmic", 4, True),
    "game_of_life_halting": ("algorithmic", 4, True),
    "gcd": ("arithmetic", 4, True),
    "graph_color": ("algorithmic", 4, False),
    "group_anagrams": ("algorithmic", 4, True),
    "gsm_symbolic": ("arithmetic", 0, True),
    "intermediate_integration": ("algebra", 8, True),
    "isomorphic_strings": ("algorithmic", 4, True),
    "jugs": ("algorithmic", 4, True),
    "kakurasu": ("games", 4, True),
    "knight_swap": ("games", 5, True),
    "knights_knaves": ("logic", 4, True),
    "largest_island": ("graphs", 4, True),
    "lcm": ("arithmetic", 4, True),
    "leg_counting": ("arithmetic", 36, True),
    "letter_counting": ("algorithmic", 8, True),
    "letter_jumble": ("algorithmic", 5, True),
    "list_functions": ("induction", 0, True),
    "mahjong_puzzle": ("games", 4, True),
    "manipulate_matrix": ("algorithmic", 5, True),
    "maze": ("games", 4, True),
    "mini_sudoku": ("games", 5, True),
    "modulo_grid": ("cognition", 6, True),
    "n_queens": ("games", 5, True),
    "needle_haystack": ("cognition", 4, True),
    "number_filtering": ("algorithmic", 4, True),
    "number_format": ("arithmetic", 4, True),
    "number_sequence": ("cognition", 4, True),
    "number_sorting": ("algorithmic", 8, True),
    "palindrome_generation": ("algorithmic", 4, True),
    "palindrome_partitioning": ("algorithmic", 4, True),
    "path_star": ("graphs", 4, True),
    "polynomial_equations": ("algebra", 4, True),
    "polynomial_multiplication": ("algebra", 4, True),
    "pool_matrix": ("algorithmic", 4, True),
    "power_function": ("arithmetic", 5, True),
    "prime_factorization": ("arithmetic", 4, True),
    "products": ("arithmetic", 11, True),
    "propositional_logic": ("logic", 5, False),
    "puzzle24": ("games", 7, True),
    "quantum_lock": ("graphs", 10, True),
    "ransom_note": ("algorithmic", 4, True),
    "rearc": ("arc", 7, True),
    "rectangle_count": ("cognition", 5, True),
    "rotate_matrix": ("algorithmic", 5, True),
    "rotten_oranges": ("algorithmic", 4, True),
    "rubiks_cube": ("cognition", 5, False),
    "rush_hour": ("games", 4, False),
    "self_reference": ("logic", 10, True),
    "sentence_reordering": ("algorithmic", 4, True),
    "shortest_path": ("graphs", 4, True),
    "simple_equations": ("algebra", 4, True),
    "simple_geometry": ("geometry", 4, True),
    "simple_integration": ("algebra", 4, True),
    "sokoban": ("games", 14, True),
    "spell_backward": ("algorithmic", 5, True),
    "spiral_matrix": ("algorithmic", 4, True),
    "string_insertion": ("algorithmic", 4, True),
    "string_manipulation": ("algorithmic", 5, True),
    "string_splitting": ("algorithmic", 4, True),
    "string_synthesis": ("algorithmic", 4, True),
    "sudoku": ("games", 5, True),
    "survo": ("games", 4, True),
    "syllogism": ("logic", 4, True),
    "time_intervals": ("arithmetic", 7, True),
    "tower_of_hanoi": ("games", 4, True),
    "tsumego": ("games", 4, True),
    "word_ladder": ("algorithmic", 3, True),
    "word_sequence_reversal": ("algorithmic", 4, True),
    "word_sorting": ("algorithmic", 5, True),
    "zebra_puzzles": ("logic", 6, True),
}
"""``name -> (category, curriculum levels, has a reference answer)``: the category is
reasoning-gym's package (``reasoning_gym.<category>.<module>``); the curriculum levels are how many
global levels its curriculum has (0: no curriculum); a dataset without a reference answer
(``entry["answer"]`` is ``None``: many answers are right, and ``score_answer`` checks one) has no
scripted expert."""

DEFAULT_SIZE = 100_000
"""Item indices a dataset's splits are cut from (train 80%, validation 10%, test 10%)."""

SIZES = {"acre": 10_000, "word_ladder": 20_000}
"""Datasets that build all their items up front (acre) or cannot build more (word_ladder)."""

NO_DEFAULT_BUILD = {
    "composite": "needs 'datasets', the list of datasets it mixes (-o datasets=[...]): there is no "
    "default",
}
"""Datasets that cannot be built with default options, and why."""
