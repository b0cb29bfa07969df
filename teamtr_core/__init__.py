"""The bottom floor: what every layer shares, importing nothing upward (and no torch).

* :mod:`teamtr_core.policy`: the Policy protocol, ``SamplingParams``, ``Generation``,
  ``TokenLogprobs``, ``TrainablePolicy``, ``LoraSettings``;
* :mod:`teamtr_core.toolcalls`: the tool-call text format (parsing, canonical rendering);
* :mod:`teamtr_core.errors`: the one error hierarchy (``TeamTRError``, ``ConfigError``, ...);
* :mod:`teamtr_core.config`: the typed-config machinery (validation reporting every problem,
  building, YAML/JSON files, ``--set`` overrides), on :mod:`teamtr_core.config_schema` (JSON
  Schema from dataclasses, the wording of schema errors);
* :mod:`teamtr_core.registry`: the plugin-registry plumbing (versioned ids, entry-point plugins)
  that the task and learner registries share;
* :mod:`teamtr_core.choices`: checks of ``Literal`` choices read from the type itself;
* :mod:`teamtr_core.seeds`: :func:`~teamtr_core.seeds.derive_seed` and every named seed stream.

The layers above, top to bottom: the CLI (``teamtr_cli``), ``trainers``, then ``adapters`` and
``teamtr_env`` (independent of each other), ``tasks``, then this package (docs/architecture.md;
enforced by import-linter in ``make lint``).
"""
