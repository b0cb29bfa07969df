"""teamtr_core.config and teamtr_core.config_schema: schema generation, validation reporting
every problem, files and overrides."""

from __future__ import annotations

import enum
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from teamtr_core.config import (
    apply_overrides,
    dump_config,
    from_dict,
    inherit,
    load_config,
    parse_override,
    to_dict,
)
from teamtr_core.config_schema import json_schema
from teamtr_core.errors import ConfigError
from teamtr_env.protocol import TeamProtocol


# Module level: get_type_hints must resolve the (string) annotations.
@dataclass(frozen=True)
class Optim:
    lr: float = field(default=1e-4, metadata={"help": "learning rate"})
    betas: tuple[float, ...] = (0.9, 0.999)


@dataclass(frozen=True)
class Agent:
    backend: Literal["hf", "scripted"] = "hf"
    path: str | None = None
    lora_r: int | None = None

    def __post_init__(self) -> None:
        if self.lora_r is not None and self.lora_r <= 0:
            raise ValueError(f"lora_r: expected a positive rank, got {self.lora_r}")


@dataclass(frozen=True)
class Run:
    name: str = field(metadata={"help": "run name"})
    steps: int = 10
    optim: Optim = field(default_factory=Optim)
    agents: dict[str, Agent] = field(default_factory=dict)
    mode: Literal["a", "b"] = "a"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Extras:
    color: Color = Color.RED
    pair: tuple[int, str] = (1, "x")
    out: Path = Path("out")
    tags: list[str] = field(default_factory=list)
    extra: Any = None
    team: TeamProtocol = field(default_factory=TeamProtocol)
    sub: Optim | None = None


@dataclass(frozen=True)
class Checked:
    low: int = 0
    high: int = 1

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low must be <= high, got low={self.low}, high={self.high}")


@dataclass(frozen=True)
class HasSet:
    ok: int = 0
    ids: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class IntKeys:
    table: dict[int, str] = field(default_factory=dict)


def _errors(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return excinfo.value.errors


def test_schema_key_parts() -> None:
    schema = json_schema(Run)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["name"]
    props = schema["properties"]
    assert list(props) == ["name", "steps", "optim", "agents", "mode"]
    assert props["name"] == {"type": "string", "description": "run name"}
    assert props["steps"] == {"type": "integer", "default": 10}
    assert props["mode"] == {"enum": ["a", "b"], "default": "a"}
    optim = props["optim"]
    assert optim["additionalProperties"] is False and optim["required"] == []
    assert optim["properties"]["lr"] == {
        "type": "number",
        "description": "learning rate",
        "default": 1e-4,
    }
    assert optim["properties"]["betas"]["items"] == {"type": "number"}
    assert optim["properties"]["betas"]["type"] == "array"
    assert optim["default"] == {"lr": 1e-4, "betas": [0.9, 0.999]}
    agent = props["agents"]["additionalProperties"]
    assert props["agents"]["type"] == "object" and props["agents"]["default"] == {}
    assert agent["additionalProperties"] is False
    assert agent["properties"]["backend"]["enum"] == ["hf", "scripted"]
    assert agent["properties"]["path"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert agent["properties"]["lora_r"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]


def test_schema_of_enum_fixed_tuple_path_any_and_foreign_dataclass() -> None:
    props = json_schema(Extras)["properties"]
    assert props["color"] == {"enum": ["red", "blue"], "default": "red"}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["pair"]["items"] is False and props["pair"]["minItems"] == 2
    assert props["out"] == {"type": "string", "default": "out"}
    assert props["extra"] == {"default": None}
    assert props["team"]["properties"]["reasoning"]["enum"] == ["keep", "strip"]
    assert props["sub"]["anyOf"][1] == {"type": "null"}


@pytest.mark.parametrize(
    "instance", [Run(name="n", agents={"a": Agent()}), Optim(), Agent(), Extras(), Checked()]
)
def test_schema_is_valid_draft_2020_12(instance: Any) -> None:
    schema = json_schema(type(instance))
    Draft202012Validator.check_schema(schema)
    assert Draft202012Validator(schema).is_valid(to_dict(instance))


def test_valid_dict_builds_nested_dataclasses_and_tuples() -> None:
    data = {
        "name": "r1",
        "steps": 3,
        "optim": {"lr": 1, "betas": [0.5, 0.6]},
        "agents": {"solver": {"backend": "scripted", "lora_r": 8}, "critic": {}},
    }
    run = from_dict(Run, data)
    assert run == Run(
        name="r1",
        steps=3,
        optim=Optim(lr=1.0, betas=(0.5, 0.6)),
        agents={"solver": Agent("scripted", None, 8), "critic": Agent()},
    )
    assert isinstance(run.optim, Optim) and isinstance(run.agents["solver"], Agent)
    assert isinstance(run.optim.betas, tuple) and isinstance(run.optim.lr, float)
    assert data["optim"] == {"lr": 1, "betas": [0.5, 0.6]}  # input untouched
    assert from_dict(Run, to_dict(run)) == run
    assert json.loads(json.dumps(to_dict(run))) == to_dict(run)


def test_extras_round_trip_converts_enum_path_tuple_and_mapping_proxy() -> None:
    x = from_dict(
        Extras,
        {"color": "blue", "pair": [2, "y"], "out": "a/b", "sub": {"lr": 0.5}, "extra": [1]},
    )
    assert x.color is Color.BLUE and x.pair == (2, "y") and x.out == Path("a/b")
    assert x.sub == Optim(lr=0.5)
    data = to_dict(x)
    assert data["color"] == "blue" and data["out"] == "a/b" and data["pair"] == [2, "y"]
    assert isinstance(data["team"]["system_prompts"], dict)  # was a MappingProxyType
    json.dumps(data)
    assert from_dict(Extras, data) == x


_names = st.text(alphabet="abcxyz_", min_size=1, max_size=6)
_agents = st.builds(
    Agent,
    backend=st.sampled_from(["hf", "scripted"]),
    path=st.none() | st.text(max_size=10),
    lora_r=st.none() | st.integers(1, 64),
)
_runs = st.builds(
    Run,
    name=st.text(max_size=10) | st.sampled_from(["1e-4", "true", "null", "0x1F", "'a: b'"]),
    steps=st.integers(-(10**6), 10**6),
    optim=st.builds(
        Optim,
        lr=st.floats(allow_nan=False, allow_infinity=False),
        betas=st.lists(st.floats(-1, 1), max_size=3).map(tuple),
    ),
    agents=st.dictionaries(_names, _agents, max_size=3),
    mode=st.sampled_from(["a", "b"]),
)


@settings(max_examples=100, deadline=None)
@given(_runs)
def test_round_trip_property(run: Run) -> None:
    data = to_dict(run)
    assert from_dict(Run, json.loads(json.dumps(data))) == run
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".yaml", ".json"):
            dump_config(run, Path(tmp) / f"run{suffix}")
            assert load_config(Run, Path(tmp) / f"run{suffix}") == run


def test_five_problems_reported_at_once() -> None:
    data = {
        "steps": "many",  # wrong type
        "mode": "c",  # bad enum
        "optim": {"lrr": 0.1, "betas": [0.9, "x"]},  # unknown key (near miss), bad nested type
    }  # and "name" is missing
    with pytest.raises(ConfigError) as err:
        from_dict(Run, data, what="run config")
    errors = _errors(err)
    assert len(errors) == 5, errors
    text = str(err.value)
    assert text.startswith("Invalid run config (5 problem(s))")
    assert errors == [  # sorted by path
        "mode: 'c' is not one of ['a', 'b']",
        "name: required key is missing (add it)",
        "unknown key 'lrr' in optim (did you mean 'lr'?)",
        "optim.betas[1]: expected number, got 'x'",
        "steps: expected integer, got 'many'",
    ]
    assert all(f"  - {p}" in text for p in errors)


def test_config_error_lines_are_errors_and_the_old_name_problems_is_gone() -> None:
    err = ConfigError("demo", ["a is bad", "b is bad"])
    assert err.errors == ["a is bad", "b is bad"]
    assert str(err) == "Invalid demo (2 problem(s)):\n  - a is bad\n  - b is bad"
    assert not hasattr(err, "problems")  # renamed to errors (CHANGELOG.md)


def test_nested_enum_nullable_and_top_level_messages() -> None:
    with pytest.raises(ConfigError) as err:
        from_dict(
            Run,
            {
                "name": "x",
                "zzz": 1,
                "stepz": 1,
                "agents": {"solver": {"backend": "hff", "lora_r": "8", "pth": "p"}},
            },
        )
    assert _errors(err) == [
        "unknown key 'stepz' at top level (did you mean 'steps'?)",
        "unknown key 'zzz' at top level (allowed: name, steps, optim, agents, mode)",
        "unknown key 'pth' in agents.solver (did you mean 'path'?)",
        "agents.solver.backend: 'hff' is not one of ['hf', 'scripted'] (did you mean 'hf'?)",
        "agents.solver.lora_r: expected integer or null, got '8'",
    ]
    with pytest.raises(ConfigError) as err:
        from_dict(Extras, {"sub": {"lr": "x", "lrr": 1}, "pair": [1], "color": "green"})
    assert _errors(err) == [
        "color: 'green' is not one of ['red', 'blue']",
        "pair: [1] is too short",
        "unknown key 'lrr' in sub (did you mean 'lr'?)",
        "sub.lr: expected number, got 'x'",
    ]
    with pytest.raises(ConfigError, match=r"top level: expected mapping, got \[1, 2\]"):
        from_dict(Run, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"steps: expected integer, got True"):
        from_dict(Run, {"name": "x", "steps": True})


def test_post_init_value_error_surfaces_as_config_error_with_path() -> None:
    with pytest.raises(ConfigError) as err:
        from_dict(Run, {"name": "x", "agents": {"a": {"lora_r": 0}, "b": {"lora_r": -2}}})
    assert _errors(err) == [
        "agents.a.lora_r: expected a positive rank, got 0",
        "agents.b.lora_r: expected a positive rank, got -2",
    ]
    with pytest.raises(ConfigError) as err:
        from_dict(Checked, {"low": 3, "high": 1})
    assert _errors(err) == ["low must be <= high, got low=3, high=1"]


def test_post_init_config_error_of_nested_dataclass_gets_path_prefix() -> None:
    with pytest.raises(ConfigError) as err:
        from_dict(Extras, {"team": {"agents": ["a", "a"], "max_turns": 0}})
    assert any(p.startswith("team.agents: ") for p in _errors(err))
    assert any(p.startswith("team.max_turns: ") for p in _errors(err))


def _write(path: Path, data: dict[str, Any]) -> Path:
    import yaml

    path.write_text(json.dumps(data) if path.suffix == ".json" else yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_load_file_with_overrides(tmp_path: Path, suffix: str) -> None:
    path = _write(tmp_path / f"run{suffix}", {"name": "r", "agents": {"solver": {}}})
    assert load_config(Run, path) == Run(name="r", agents={"solver": Agent()})
    run = load_config(
        Run,
        str(path),
        ["optim.lr=3e-4", "agents.solver.backend=scripted", "steps=20", "optim.betas=[0.8, 1e-2]"],
    )
    assert run.optim == Optim(lr=3e-4, betas=(0.8, 0.01)) and run.steps == 20
    assert run.agents["solver"].backend == "scripted"


def test_yaml_reads_exponent_floats(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("name: r\noptim:\n  lr: 1e-4\n  betas: [9e-1, 2.5E+0]\n")
    assert load_config(Run, path).optim == Optim(lr=1e-4, betas=(0.9, 2.5))


def test_malformed_override_and_bad_value_reported_together(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.yaml", {"name": "r"})
    with pytest.raises(ConfigError) as err:
        load_config(Run, path, ["steps", "optim.lr=fast", "optim.lrr=1", "name.x=1"])
    errors = _errors(err)
    assert len(errors) == 4, errors
    assert "override 'steps': expected KEY=VALUE" in errors[0]
    assert "override 'name.x=1': name is 'r', not a mapping" in errors[1]
    assert "optim.lr: expected number, got 'fast'" in errors
    assert "unknown key 'lrr' in optim (did you mean 'lr'?)" in errors
    assert str(path) in str(err.value)


def test_yaml_and_json_syntax_errors_mention_the_line(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: r\nsteps: 3\n  bad: indent\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml, line 3, column 6: invalid YAML: mapping"):
        load_config(Run, bad_yaml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"name": "r",\n "steps": 3,,\n}')
    with pytest.raises(ConfigError, match=r"bad\.json, line 2, column \d+: invalid JSON"):
        load_config(Run, bad_json)


def test_file_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="file not found") as err:
        load_config(Run, missing)
    assert str(missing) in str(err.value)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"list\.yaml: expected a mapping .* got list"):
        load_config(Run, listed)
    with pytest.raises(ConfigError, match=r"expected a \.yaml, \.yml or \.json file"):
        load_config(Run, tmp_path / "run.toml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="name: required key is missing"):
        load_config(Run, empty)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_dump_then_load_round_trip(tmp_path: Path, suffix: str) -> None:
    run = Run(
        name="1e-4",  # a string that looks like a float must stay a string
        steps=7,
        optim=Optim(lr=3e-20, betas=(0.1,)),
        agents={"solver": Agent("scripted", "m/p", 4), "critic": Agent()},
        mode="b",
    )
    path = tmp_path / f"out{suffix}"
    dump_config(run, path)
    assert load_config(Run, path) == run
    extras = Extras(color=Color.BLUE, out=Path("x/y"), team=TeamProtocol(agents=("a", "b")))
    dump_config(extras, path)
    assert load_config(Extras, path) == extras
    with pytest.raises(ConfigError, match=r"expected a \.yaml, \.yml or \.json file"):
        dump_config(run, tmp_path / "out.txt")


def test_unsupported_annotation_raises_type_error_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"HasSet\.ids: unsupported annotation set\[int\]"):
        json_schema(HasSet)
    with pytest.raises(TypeError, match=r"IntKeys\.table: unsupported annotation"):
        json_schema(IntKeys)
    with pytest.raises(TypeError, match="expected a dataclass"):
        json_schema(dict)
    with pytest.raises(TypeError, match="expected a dataclass instance"):
        to_dict(Run)


@pytest.mark.parametrize(
    ("text", "keys", "value"),
    [
        ("optim.lr=1e-4", ["optim", "lr"], 1e-4),
        ("agents=[a, b]", ["agents"], ["a", "b"]),
        ("flag=true", ["flag"], True),
        ("name=foo", ["name"], "foo"),
        ("name = foo bar ", ["name"], "foo bar"),
        ("path=null", ["path"], None),
        ("name=", ["name"], ""),
        ("expr=a=b", ["expr"], "a=b"),
        ("steps=-3", ["steps"], -3),
    ],
)
def test_parse_override(text: str, keys: list[str], value: Any) -> None:
    assert parse_override(text) == (keys, value)


@pytest.mark.parametrize("text", ["steps", "=3", "a..b=1", "a.=1", "x=[1, 2"])
def test_parse_override_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="override"):
        parse_override(text)


def test_apply_overrides_copies_creates_and_reports_all() -> None:
    data = {"name": "r", "optim": {"lr": 0.1}, "agents": None}
    out = apply_overrides(data, ["optim.lr=0.2", "agents.solver.backend=scripted"])
    assert out == {
        "name": "r",
        "optim": {"lr": 0.2},
        "agents": {"solver": {"backend": "scripted"}},
    }
    assert data == {"name": "r", "optim": {"lr": 0.1}, "agents": None}
    with pytest.raises(ConfigError) as err:
        apply_overrides(data, ["nokey", "name.first=x", "ok=1", "also bad"])
    assert len(_errors(err)) == 3
    assert "set name=... instead" in _errors(err)[1]


@pytest.mark.parametrize("text", ["\x85", "a\u2028b", "c\u2029", "é ☃"])
def test_yaml_round_trip_keeps_unicode_line_separators(text: str, tmp_path: Path) -> None:
    run = Run(name=text, agents={"a": Agent(path=text)})
    dump_config(run, tmp_path / "run.yaml")
    assert load_config(Run, tmp_path / "run.yaml") == run


@dataclass(frozen=True)
class Member:
    lr: float = 0.1
    size: int = 1
    _renamed_keys: ClassVar[dict[str, str]] = {"rate": "lr"}


@dataclass(frozen=True)
class Squad:
    shared: Member | None = None
    members: dict[str, Member] = field(default_factory=dict)
    optim: Optim = field(default_factory=Optim)
    _renamed_keys: ClassVar[dict[str, str]] = {"learning_rate": "optim.lr"}

    @staticmethod
    def _prepare_config(data: dict[str, Any]) -> None:
        members = data.get("members")
        for name, own in (members or {}).items():
            members[name] = inherit(data.get("shared"), own, Member())


def test_renamed_keys_are_problems_naming_the_new_key_in_every_nested_section() -> None:
    """An old key does not load: it is a problem naming its new key (not a second time an unknown
    key), in every nested section, reported with the config's other problems."""
    data = {
        "learning_rate": 0.5,
        "shared": {"rate": 0.2},
        "members": {"a": {"rate": 0.3, "size": "x"}},
    }
    with pytest.raises(ConfigError) as excinfo:
        from_dict(Squad, data)
    errors = _errors(excinfo)
    assert errors[:3] == [
        "learning_rate was renamed to optim.lr",
        "shared.rate was renamed to shared.lr",
        "members.a.rate was renamed to members.a.lr",
    ]
    assert len(errors) == 4 and "members.a.size" in errors[3]
    assert not any("unknown" in e or "Additional" in e for e in errors)
    assert data == {  # the caller's data is left as it was
        "learning_rate": 0.5,
        "shared": {"rate": 0.2},
        "members": {"a": {"rate": 0.3, "size": "x"}},
    }
    with pytest.raises(ConfigError, match=r"learning_rate was renamed to optim\.lr"):
        from_dict(Squad, {"learning_rate": 0.5, "optim": {"lr": 0.1}})
    squad = from_dict(Squad, {"optim": {"lr": 0.5}, "shared": {"lr": 0.2}})
    assert squad.optim.lr == 0.5 and squad.shared == Member(lr=0.2)


def test_prepare_hooks_let_a_section_inherit_unset_keys_from_its_parent() -> None:
    squad = from_dict(Squad, {"shared": {"lr": 0.2, "size": 4}, "members": {"a": {"size": 2}}})
    assert squad.members["a"] == Member(lr=0.2, size=2)  # own key wins, the rest inherited
    assert from_dict(Squad, to_dict(squad)) == squad  # the inherited data round-trips
    assert from_dict(Squad, {"members": {"b": {}}}).members["b"] == Member()  # defaults
    with pytest.raises(ConfigError, match="members.a"):  # malformed data is left to validation
        from_dict(Squad, {"members": {"a": 3}})
    assert inherit({"lr": 1}, "oops", Member()) == "oops"


@dataclass(frozen=True)
class RateSection:
    rate: float = 0.5
    mode: Literal["a", "b"] = "a"
    count: int = 1

    def __post_init__(self) -> None:
        errors = []
        if not 0 <= self.rate <= 1:
            errors.append(f"rate must be in [0, 1], got {self.rate}")
        if self.count < 1:
            errors.append(f"count must be >= 1, got {self.count}")
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True)
class Sections:
    first: RateSection = field(default_factory=RateSection)
    second: RateSection = field(default_factory=RateSection)
    named: dict[str, RateSection] = field(default_factory=dict)
    top: int = 0

    def __post_init__(self) -> None:
        if self.top < 0:
            raise ValueError(f"top must be >= 0, got {self.top}")


def test_a_schema_problem_does_not_hide_the_sections_own_checks() -> None:
    """A schema problem used to stop the build, so every __post_init__ problem (of its section,
    of the other sections, of the top level) showed only after it was fixed."""
    data = {
        "first": {"mode": "c", "count": 0},  # a schema problem and its section's own problem
        "second": {"rate": 2.0},
        "named": {"x": {"rate": -1.0}, "y": {"count": "many"}},
        "top": -1,
    }
    with pytest.raises(ConfigError) as err:
        from_dict(Sections, data)
    assert sorted(err.value.errors) == sorted(
        [
            "first.mode: 'c' is not one of ['a', 'b']",
            "named.y.count: expected integer, got 'many'",
            "first: count must be >= 1, got 0",
            "second: rate must be in [0, 1], got 2.0",
            "named.x: rate must be in [0, 1], got -1.0",
            "top must be >= 0, got -1",
        ]
    )
    assert from_dict(Sections, {"first": {"rate": 1}}).first.rate == 1.0


def _no_negative(value: Any) -> list[str]:
    return [f"must be >= 0, got {value}"] if isinstance(value, int) and value < 0 else []


@dataclass(frozen=True)
class Probed:
    value: int = field(default=0, metadata={"check": _no_negative})


@dataclass(frozen=True)
class WithChecks:
    members: dict[str, Probed] = field(default_factory=dict)
    limit: int = field(default=0, metadata={"check": _no_negative})


def test_field_checks_reach_every_section_of_a_mapping() -> None:
    """A field check inside a ``dict[str, Section]`` (a team's agents) was never run."""
    with pytest.raises(ConfigError) as err:
        from_dict(WithChecks, {"members": {"a": {"value": -2}}, "limit": -1})
    assert err.value.errors == [
        "members.a.value: must be >= 0, got -2",
        "limit: must be >= 0, got -1",
    ]
