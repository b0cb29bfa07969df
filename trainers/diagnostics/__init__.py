"""The paper's diagnostics as plain estimators (no trainer state): zeta proxies, occupancy drift,
importance-weight statistics (:mod:`~trainers.diagnostics.estimators`) and the improvement
certificate (:mod:`~trainers.diagnostics.certificate`). What a stage measures with them is
:mod:`trainers.learners.stage_diagnostics`; docs/diagnostics.md."""
