"""Tests for trainers.run.logger: JSONL, TensorBoard, fan-out, key checks and learning-curve plots."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from trainers.run.logger import (
    JsonlLogger,
    MetricsLogger,
    MultiLogger,
    NullLogger,
    TensorBoardLogger,
    check_key,
    plot_learning_curves,
    read_jsonl,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_steps(path: Path, steps: range, resume_step: int | None = None) -> None:
    logger = JsonlLogger(path, resume_step=resume_step)
    for step in steps:
        logger.log({"stage/reward_mean": step / 10, "eval/pass@4": 0.5}, step)
    logger.close()


# ---- JSONL ----------------------------------------------------------------------------------


def test_jsonl_lines_parse_in_step_order(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "metrics.jsonl"
    logger = JsonlLogger(path)
    logger.log({"stage/reward_mean": 0.25, "agent/solver/kl_tok": 3, "stage/done": True}, step=0)
    # Flushed per line: readable before close, as after a crash.
    assert json.loads(path.read_text().splitlines()[0])["stage/reward_mean"] == 0.25
    logger.log({"stage/reward_mean": 0.5}, step=1)
    logger.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [0, 1]
    assert records[0]["agent/solver/kl_tok"] == 3
    assert records[0]["stage/done"] is True
    assert isinstance(records[0]["time"], float)
    assert abs(records[0]["time"] - records[1]["time"]) < 60
    assert "_nonfinite" not in records[0]
    assert read_jsonl(path) == records


def test_jsonl_nonfinite_written_as_null_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    logger = JsonlLogger(path)
    logger.log({"stage/loss": math.nan, "stage/grad": -math.inf, "stage/ok": 1.0}, step=3)
    logger.close()
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    (record,) = read_jsonl(path)
    assert record["stage/loss"] is None and record["stage/grad"] is None
    assert record["stage/ok"] == 1.0
    assert sorted(record["_nonfinite"]) == ["stage/grad", "stage/loss"]


def test_jsonl_resume_truncates_later_steps_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write_steps(path, range(6))  # steps 0..5 written; checkpoint was at step 3
    _write_steps(path, range(4, 7), resume_step=3)
    steps = [r["step"] for r in read_jsonl(path)]
    assert steps == [0, 1, 2, 3, 4, 5, 6]  # no duplicates of 4 and 5
    assert not (tmp_path / "m.jsonl.tmp").exists()


def test_jsonl_resume_on_missing_file_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    _write_steps(path, range(2), resume_step=10)
    assert [r["step"] for r in read_jsonl(path)] == [0, 1]


def test_jsonl_resume_drops_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write_steps(path, range(3))
    with path.open("a") as f:
        f.write('{"step": 3, "stage/rew')  # crash mid-write
    _write_steps(path, range(3, 5), resume_step=2)
    assert [r["step"] for r in read_jsonl(path)] == [0, 1, 2, 3, 4]


def test_jsonl_fresh_mode_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write_steps(path, range(5))
    _write_steps(path, range(2))
    assert [r["step"] for r in read_jsonl(path)] == [0, 1]


def test_read_jsonl_reports_corrupt_middle_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"step": 0}\nnot json\n{"step": 1}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        read_jsonl(path)


def test_numpy_scalars_become_plain_json(tmp_path: Path) -> None:
    logger = JsonlLogger(tmp_path / "m.jsonl")
    # numpy scalars are outside the declared types but common in trainer code (e.g. arr.mean()).
    metrics = {"stage/a": np.float32(0.5), "stage/b": np.int64(3), "stage/c": np.float64("nan")}
    logger.log(metrics, 0)  # type: ignore[arg-type]
    logger.close()
    (record,) = read_jsonl(tmp_path / "m.jsonl")
    assert (record["stage/a"], record["stage/b"], record["stage/c"]) == (0.5, 3, None)
    assert type(record["stage/b"]) is int
    assert record["_nonfinite"] == ["stage/c"]


def test_non_numeric_value_raises_type_error(tmp_path: Path) -> None:
    logger = JsonlLogger(tmp_path / "m.jsonl")
    with pytest.raises(TypeError, match=r"stage/name.*str"):
        logger.log({"stage/name": "solver"}, step=0)  # type: ignore[dict-item]
    logger.close()


# ---- TensorBoard ----------------------------------------------------------------------------


def test_tensorboard_scalars_read_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    logger.log({"stage/reward_mean": 0.5, "agent/solver/kl_tok": 2, "eval/solved": True}, step=1)
    with caplog.at_level(logging.WARNING, logger="trainers.run.logger"):
        logger.log({"stage/reward_mean": 0.75, "eval/solved": False, "stage/loss": math.nan}, 2)
        logger.log({"stage/loss": math.inf}, step=3)
    logger.close()

    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert set(tags) == {"stage/reward_mean", "agent/solver/kl_tok", "eval/solved"}
    reward = acc.Scalars("stage/reward_mean")
    assert [e.step for e in reward] == [1, 2]
    assert [e.value for e in reward] == pytest.approx([0.5, 0.75])
    assert [(e.step, e.value) for e in acc.Scalars("agent/solver/kl_tok")] == [(1, 2.0)]
    assert [(e.step, e.value) for e in acc.Scalars("eval/solved")] == [(1, 1.0), (2, 0.0)]
    warnings = [r for r in caplog.records if "stage/loss" in r.getMessage()]
    assert len(warnings) == 1  # once per key, not once per step


# ---- fan-out and null -----------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float | int | bool], int]] = []
        self.closed = False

    def log(self, metrics: Mapping[str, float | int | bool], step: int) -> None:
        self.calls.append((dict(metrics), step))

    def close(self) -> None:
        self.closed = True


def test_multilogger_fans_out(tmp_path: Path) -> None:
    recorder = _Recorder()
    jsonl = JsonlLogger(tmp_path / "m.jsonl")
    multi: MetricsLogger = MultiLogger(recorder, jsonl)
    multi.log({"stage/reward_mean": 1.5}, step=7)
    multi.close()
    assert recorder.calls == [({"stage/reward_mean": 1.5}, 7)]
    assert recorder.closed
    assert jsonl._file.closed
    (record,) = read_jsonl(tmp_path / "m.jsonl")
    assert (record["step"], record["stage/reward_mean"]) == (7, 1.5)


def test_null_logger_does_nothing_but_checks_keys(tmp_path: Path) -> None:
    logger: MetricsLogger = NullLogger()
    logger.log({"stage/reward_mean": 1.0}, step=0)
    logger.close()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="reward"):
        logger.log({"reward": 1.0}, step=0)


# ---- keys -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["reward", "stage//x", "stage/re ward", "/x", "a/b/c/d", "a/b/"])
def test_bad_keys_raise(key: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"bad metric key .*expected 'a/b' or 'a/b/c'"):
        check_key(key)
    for logger in (JsonlLogger(tmp_path / "m.jsonl"), TensorBoardLogger(tmp_path / "tb")):
        with pytest.raises(ValueError, match=re.escape(repr(key))):
            logger.log({key: 1.0}, step=0)
        logger.close()


@pytest.mark.parametrize(
    "key",
    ["stage/reward_mean", "agent/solver/kl_tok", "eval/pass@4", "eval/pass^2", "a-b/c.d/E_9"],
)
def test_good_keys_pass(key: str) -> None:
    check_key(key)


# ---- plots ----------------------------------------------------------------------------------


@pytest.fixture
def no_display(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND"):
        monkeypatch.delenv(var, raising=False)


def _png_ok(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == PNG_SIGNATURE and len(data) > 1000


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()  # IHDR: width and height, big-endian, at bytes 16..24
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_default_keys(tmp_path: Path, no_display: None) -> None:
    jsonl = tmp_path / "m.jsonl"
    logger = JsonlLogger(jsonl)
    for step in range(10):
        metrics = {"stage/reward_mean": step / 10, "eval/pass@4": 0.5, "agent/solver/kl_tok": 0.1}
        logger.log({**metrics, "stage/loss": math.nan if step == 4 else 1.0}, step)
    logger.close()
    out = plot_learning_curves(jsonl, tmp_path / "plots" / "curves.png", title="run")
    assert out == tmp_path / "plots" / "curves.png"
    assert _png_ok(out)
    width, height = _png_size(out)
    assert width == 3 * 450 and height == 320  # stage/reward_mean, eval/pass@4, stage/loss: 1x3


def test_plot_key_filter(tmp_path: Path, no_display: None) -> None:
    jsonl = tmp_path / "m.jsonl"
    _write_steps(jsonl, range(5))
    out = plot_learning_curves(jsonl, tmp_path / "one.png", keys=["stage/reward_mean"])
    assert _png_ok(out)
    assert _png_size(out) == (450, 320)  # one subplot only
    four = ["stage/reward_mean", "eval/pass@4", "stage/a", "stage/b"]
    assert _png_size(plot_learning_curves(jsonl, tmp_path / "four.png", keys=four)) == (1350, 640)
    with pytest.raises(ValueError, match="bad metric key"):
        plot_learning_curves(jsonl, tmp_path / "bad.png", keys=["reward"])


def test_plot_empty_file_writes_no_data_png(tmp_path: Path, no_display: None) -> None:
    jsonl = tmp_path / "empty.jsonl"
    JsonlLogger(jsonl).close()
    out = plot_learning_curves(jsonl, tmp_path / "empty.png")
    assert _png_ok(out)
    assert _png_size(out) == (450, 320)
    from matplotlib.image import imread

    pixels = imread(out)  # axes are off, so any dark pixel is the "no data" text
    assert (pixels[..., :3] < 0.5).any()
