"""The registry: ids, specs, make with kwargs merging, typed errors and entry-point plugins."""

from __future__ import annotations

import warnings
from importlib import metadata

import pytest

import teamtr_env
from tasks.arith import ArithTask
from teamtr_env import (
    DuplicateTaskError,
    InvalidKwargsError,
    InvalidTaskIdError,
    PluginLoadError,
    PluginLoadWarning,
    Registry,
    UnknownTaskError,
    VersionNotFoundError,
)


@pytest.fixture
def reg() -> Registry:
    r = Registry(plugins=False)
    r.register("demo/Add-v0", "tasks.arith:ArithTask", description="add", kwargs={"digits": 1})
    r.register("demo/Add-v1", ArithTask, kwargs={"digits": 3, "operators": "+-"})
    return r


def test_register_requires_a_version(reg: Registry) -> None:
    with pytest.raises(InvalidTaskIdError, match="'demo/Sub-v0'"):
        reg.register("demo/Sub", ArithTask)


def test_make_merges_kwargs_over_spec_defaults(reg: Registry) -> None:
    env = reg.make("demo/Add-v1")
    assert (env.task.digits, env.task.operators) == (3, "+-")
    env = reg.make("demo/Add-v1", digits=2, agents=["a", "b"], max_message_chars=50)
    assert (env.task.digits, env.task.operators) == (2, "+-")
    assert env.possible_agents == ["a", "b"]
    assert env.protocol.final_agent == "b" and env.protocol.max_turns == 2
    assert env.protocol.max_message_chars == 50
    assert env.spec is reg["demo/Add-v1"]


def test_spec_is_frozen(reg: Registry) -> None:
    spec = reg["demo/Add-v0"]
    with pytest.raises(AttributeError):
        spec.id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.kwargs["digits"] = 5  # type: ignore[index]
    assert (spec.namespace, spec.name, spec.version) == ("demo", "Add", 0)


def test_unversioned_id_resolves_to_latest(reg: Registry) -> None:
    assert reg.spec("demo/Add").id == "demo/Add-v1"


def test_unknown_id_suggests_close_matches(reg: Registry) -> None:
    with pytest.raises(UnknownTaskError, match=r"Did you mean 'demo/Add-v0'") as err:
        reg.make("demo/Ad-v0")
    assert "teamtr tasks" in str(err.value)
    with pytest.raises(UnknownTaskError, match=r"Did you mean 'demo/Add-v0'"):
        reg.make("DEMO/add-v0")
    with pytest.raises(KeyError):  # UnknownTaskError is a KeyError: Mapping semantics hold
        reg["nothing/Here-v0"]
    assert "nothing/Here-v0" not in reg


def test_missing_version_lists_available(reg: Registry) -> None:
    with pytest.raises(VersionNotFoundError, match=r"v7.*'demo/Add-v0', 'demo/Add-v1'"):
        reg.make("demo/Add-v7")


def test_duplicates_and_override(reg: Registry) -> None:
    with pytest.raises(DuplicateTaskError, match="override=True"):
        reg.register("demo/Add-v0", ArithTask)
    reg.register("demo/Add-v0", ArithTask, kwargs={"digits": 4}, override=True)
    assert reg.make("demo/Add-v0").task.digits == 4


def test_bad_kwargs_report_every_problem_with_suggestions(reg: Registry) -> None:
    with pytest.raises(InvalidKwargsError) as err:
        reg.make("demo/Add-v0", digts=2, max_turn=3, agents="not a list", max_message_chars=0)
    errors = err.value.errors
    assert len(errors) == 4, errors
    text = str(err.value)
    assert "'digts'" in text and "Did you mean 'digits'" in text
    assert "'max_turn'" in text and "Did you mean 'max_turns'" in text
    assert "max_message_chars: expected a positive integer, got 0" in text
    assert "'not a list' is not a valid name" in text


def test_task_validation_errors_are_collected(reg: Registry) -> None:
    with pytest.raises(InvalidKwargsError) as err:
        reg.make("demo/Add-v0", digits=0, operands=9)
    assert err.value.errors == [
        "task: digits must be an integer in 1..9, got 0",
        "task: operands must be an integer in 2..6, got 9",
    ]


def test_register_rejects_unknown_env_kwargs(reg: Registry) -> None:
    with pytest.raises(InvalidKwargsError, match="'turns' is not an environment option"):
        reg.register("demo/X-v0", ArithTask, env_kwargs={"turns": 3})


def test_data_path_loads_problems(reg: Registry, tmp_path) -> None:
    from tasks import Problem, save_problems

    path = tmp_path / "p.jsonl"
    save_problems(path, [Problem(id="only", data={"expression": "2 + 2"}, answer=4)])
    env = reg.make("demo/Add-v0", data_path=str(path))
    env.reset(seed=0)
    assert env.problem.id == "only"


def test_default_registry_has_the_builtin_and_module_functions() -> None:
    assert "teamtr/Arith-v0" in teamtr_env.registry
    assert teamtr_env.spec("teamtr/Arith-v0").plugin is None
    assert isinstance(teamtr_env.make("teamtr/Arith-v0").task, ArithTask)


# -- plugins -------------------------------------------------------------------------------------


def test_installed_plugin_distribution_registers_through_entry_points() -> None:
    eps = [ep for ep in metadata.entry_points(group=teamtr_env.ENTRY_POINT_GROUP)]
    assert any(ep.name == "example" for ep in eps), (
        "the test plugin is not installed: run `pip install ./tests/fixtures/example_plugin` "
        "(the Makefile's test target does)"
    )
    reg = Registry()
    spec = reg.spec("example/Echo-v0")
    assert spec.plugin == "example"
    env = reg.make("example/Echo-v0")
    assert env.possible_agents == ["speaker"]
    env.reset(seed=0)
    env.step(env.problem.answer)
    assert env.rewards == {"speaker": 1.0}


def _ep(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=teamtr_env.ENTRY_POINT_GROUP)


def test_broken_plugin_warns_names_itself_and_leaves_others_working() -> None:
    reg = Registry(
        entry_points=lambda: [
            _ep("broken", "no_such_module_xyz:register"),
            _ep("good", "teamtr_example_plugin:register"),
        ]
    )
    with pytest.warns(
        PluginLoadWarning, match="plugin 'broken'.*No module named 'no_such_module_xyz'"
    ):
        assert "example/Echo-v0" in reg
    assert [e.plugin for e in reg.plugin_errors] == ["broken"]  # type: ignore[attr-defined]
    with pytest.raises(UnknownTaskError, match=r"plugin\(s\) \['broken'\] failed to load"):
        reg.make("broken/Thing-v0")


def test_plugin_failing_midway_registers_nothing_and_strict_raises() -> None:
    def half(registry: Registry) -> None:
        registry.register("half/A-v0", ArithTask)
        raise RuntimeError("plugin bug")

    import types

    module = types.ModuleType("half_plugin_mod")
    module.register = half  # type: ignore[attr-defined]
    import sys

    sys.modules["half_plugin_mod"] = module
    try:
        reg = Registry(
            plugins=False, entry_points=lambda: [_ep("half", "half_plugin_mod:register")]
        )
        with pytest.raises(PluginLoadError, match="plugin 'half'.*RuntimeError: plugin bug"):
            reg.load_plugins(strict=True)
        assert "half/A-v0" not in reg
    finally:
        del sys.modules["half_plugin_mod"]


def test_plugin_entry_point_must_be_callable() -> None:
    reg = Registry(entry_points=lambda: [_ep("notfn", "teamtr_example_plugin:WORDS")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(reg)
    assert any("not a callable" in str(w.message) for w in caught)


def test_entry_point_strings_need_module_and_attr(reg: Registry) -> None:
    with pytest.raises(InvalidKwargsError, match="expected 'module:attr'"):
        reg.register("demo/Bad-v0", "tasks.arith")
    reg.register("demo/Missing-v0", "tasks.arith:NoSuchTask")
    with pytest.raises(InvalidKwargsError, match="has no attribute 'NoSuchTask'"):
        reg.make("demo/Missing-v0")


def test_a_data_file_is_loaded_once_per_process_until_it_changes(tmp_path) -> None:
    import os

    from tasks import Problem, save_problems
    from tasks.arith import ArithTask
    from teamtr_env.registration import Registry

    calls = []

    class CountingArith(ArithTask):
        def load(self, path):
            calls.append(path)
            return super().load(path)

    reg = Registry(plugins=False)
    reg.register("count/Arith-v0", CountingArith)
    data = tmp_path / "p.jsonl"
    save_problems(data, [Problem(id="a", data={"expression": "1 + 1"}, answer=2, split="test")])
    for _ in range(3):
        assert [p.id for p in reg.make("count/Arith-v0", data_path=str(data)).problems] == ["a"]
    assert len(calls) == 1
    reg.make("count/Arith-v0", data_path=str(data), digits=3)  # other task arguments: reload
    assert len(calls) == 2
    save_problems(data, [Problem(id="b", data={"expression": "1 + 2"}, answer=3, split="test")])
    os.utime(data, ns=(1, 1))
    assert [p.id for p in reg.make("count/Arith-v0", data_path=str(data)).problems] == ["b"]
    assert len(calls) == 3
    # The cache belongs to the registry: another registry loads for itself, and clearing one
    # registry's cache makes it load again. Nothing is kept process-wide.
    other = Registry(plugins=False)
    other.register("count/Arith-v0", CountingArith)
    other.make("count/Arith-v0", data_path=str(data))
    assert len(calls) == 4 and len(other.loaded) == 1
    reg.loaded.clear()
    reg.make("count/Arith-v0", data_path=str(data))
    assert len(calls) == 5
