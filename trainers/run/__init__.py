"""Running a run: the recipe (``teamtr train``), the run directory and its lock, checkpoints and
run state, the report, logging, the warm start and team evaluation."""
