"""``teamtr/Pipeline-v0``: a chain of operations carried out one step per agent."""

from tasks.pipeline.rules import parse_chain, step
from tasks.pipeline.task import PipelineTask

__all__ = ["PipelineTask", "parse_chain", "step"]
