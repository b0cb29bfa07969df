"""The bottom floor: the types every layer shares, importing nothing upward (and no torch).

* :mod:`teamtr_core.policy`: the Policy protocol, ``SamplingParams``, ``Generation``,
  ``TokenLogprobs``, ``TrainablePolicy``, ``LoraSettings``;
* :mod:`teamtr_core.toolcalls`: the tool-call text format (parsing, canonical rendering);
* :mod:`teamtr_core.errors`: the one error hierarchy (``TeamTRError``, ``ConfigError``, ...).

The layers above, top to bottom: the CLI (``teamtr_env.cli``), ``trainers``, ``adapters``,
``teamtr_env``, ``tasks``, then this package (docs/architecture.md; enforced by import-linter in
``make lint``). The old paths (``adapters.base``, ``adapters.toolcalls``, ``teamtr_env.errors``)
re-export these modules.
"""
