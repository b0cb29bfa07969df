"""GGUF files (llama.cpp's and Ollama's format) as Hugging Face model folders.

transformers reads a GGUF file with the ``gguf`` package and dequantises its weights to float32,
but a model loaded that way refuses ``save_pretrained`` ("quantized with gguf and is not
serializable"). :func:`convert_gguf` loads it once, moves the weights into a plain model of the
same config and saves that: a folder with ``model.safetensors``, ``tokenizer.json`` and the chat
template, which every backend loads as it loads any checkpoint. A quantised GGUF stays a degraded
copy of its original after the conversion: float32 holds the quantised values exactly.

A team config may name a ``.gguf`` file as an agent's ``path``; :func:`model_folder` converts it
once into a cache keyed by the file's SHA-256 (:func:`cache_folder`:
``$TEAMTR_CACHE/gguf/<sha256[:16]>/``, by default under ``~/.cache/teamtr``) and loads that
folder from then on. Nothing is downloaded.

A finished folder holds :data:`MANIFEST`, written last, which records the source file's hash: a
folder without it is not used, and a conversion is written to a temporary folder beside its
destination and renamed into place, so an interrupted one leaves nothing half-written.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adapters.availability import missing_package
from teamtr_core.errors import TeamTRError

__all__ = [
    "GGUF_INSTALL",
    "MANIFEST",
    "ModelSourceError",
    "cache_folder",
    "cache_root",
    "convert_gguf",
    "file_sha256",
    "finished_conversion",
    "gguf_model_config",
    "gguf_path_errors",
    "is_gguf_path",
    "model_folder",
]

log = logging.getLogger(__name__)

GGUF_INSTALL = "pip install -e '.[gguf]' (or pip install gguf==0.19.0)"
"""How to install the ``gguf`` package, in every error about its absence."""

MANIFEST = "teamtr_source.json"
"""The file that marks a finished conversion and records its source (written last)."""

_CHUNK = 1 << 20


class ModelSourceError(TeamTRError, RuntimeError):
    """A model could not be fetched or converted: no network, a corrupt download, a file that is
    not GGUF, an architecture transformers cannot read from GGUF, or the ``gguf`` package
    missing. The message says what was expected, what was seen and what to do."""


def is_gguf_path(path: str | Path) -> bool:
    """``path`` names a GGUF file (by its suffix; it need not exist)."""
    return str(path).lower().endswith(".gguf")


def cache_root() -> Path:
    """teamtr's cache folder: ``$TEAMTR_CACHE``, else ``~/.cache/teamtr``."""
    return Path(os.environ.get("TEAMTR_CACHE") or "~/.cache/teamtr").expanduser()


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file, hex; remembered for the process while its size and modification
    time stay the same (every agent naming one file hashes it once)."""
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cache_folder(gguf_path: str | Path) -> Path:
    """Where :func:`model_folder` keeps the conversion of ``gguf_path``:
    ``cache_root()/gguf/<sha256[:16]>``."""
    return cache_root() / "gguf" / file_sha256(gguf_path)[:16]


def finished_conversion(folder: str | Path, sha256: str | None = None) -> dict[str, Any] | None:
    """The manifest of a finished conversion in ``folder`` (of the file with ``sha256``, when
    given), or ``None``: no folder, no manifest, an unreadable one or another file's."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("sha256"), str):
        return None
    if sha256 is not None and data["sha256"] != sha256:
        return None
    return data


def model_folder(path: str | Path) -> Path:
    """The Hugging Face model folder to load for a team config's ``path``: ``path`` itself,
    unless it names a ``.gguf`` file, whose conversion in the cache is used (made now, once,
    if missing: :func:`convert_gguf`).

    Raises:
        ModelSourceError: the GGUF file is missing, unreadable or cannot be converted.
    """
    if not is_gguf_path(path):
        return Path(path)
    source = Path(path)
    if not source.is_file():
        raise ModelSourceError(f"{source}: no such GGUF file; give the path of a .gguf file")
    sha = file_sha256(source)
    folder = cache_root() / "gguf" / sha[:16]
    if finished_conversion(folder, sha) is None:
        log.warning("converting %s into %s (once; later runs reuse it)", source, folder)
        convert_gguf(source, folder, sha256=sha)
    return folder


def gguf_path_errors(path: str | Path) -> list[str]:
    """What stops a ``.gguf`` ``path`` from being loaded, checked before anything starts: a
    missing file, or the ``gguf`` package missing while the file is not converted yet."""
    source = Path(path)
    if not source.is_file():
        return [f"{source}: no such GGUF file (a .gguf path must name a file)"]
    if missing_package("gguf") and finished_conversion(cache_folder(source)) is None:
        return [f"{source}: reading a GGUF file needs the gguf package: {GGUF_INSTALL}"]
    return []


def gguf_model_config(path: str | Path) -> dict[str, Any]:
    """The transformers config fields of a ``.gguf`` file's model, without converting it: its
    converted folder's ``config.json`` when the cache has it, else the file's metadata as
    transformers maps it (``hidden_size``, ``num_hidden_layers``, ...). No weight is read.

    Raises:
        ModelSourceError: the file is missing or not GGUF, or the ``gguf`` package is missing.
    """
    source = Path(path)
    if not source.is_file():
        raise ModelSourceError(f"{source}: no such GGUF file")
    folder = cache_folder(source)
    if finished_conversion(folder) is not None:
        return dict(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    _require_gguf()
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    try:
        parsed = load_gguf_checkpoint(str(source), return_tensors=False)
    except (ValueError, KeyError, IndexError) as exc:
        _architecture(source)  # raises the clearer error: not GGUF, or not readable by transformers
        raise ModelSourceError(_unreadable(source, exc)) from None
    return dict(parsed["config"])


def convert_gguf(
    gguf_path: str | Path,
    out_dir: str | Path,
    *,
    sha256: str | None = None,
    source: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Converts a GGUF file into a Hugging Face model folder (float32 safetensors, the
    tokenizer and its chat template), once.

    Args:
        gguf_path: the ``.gguf`` file.
        out_dir: the folder to write. A finished conversion of the same file there is reused;
            any other existing path is refused (nothing is overwritten).
        sha256: the file's SHA-256, when the caller has it (else it is computed).
        source: more to record in the folder's :data:`MANIFEST` (e.g. the package it came from).
        progress: called with a line before each long part.

    Returns:
        ``out_dir``, loadable with ``HFPolicy.from_pretrained`` and transformers' Auto classes.

    Raises:
        ModelSourceError: the ``gguf`` package is missing, the file is not GGUF or holds an
            architecture transformers cannot read from GGUF, or ``out_dir`` is taken.
    """
    say = progress or (lambda line: log.info("%s", line))
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise ModelSourceError(f"{gguf_path}: no such GGUF file")
    sha = sha256 or file_sha256(gguf_path)
    if finished_conversion(out_dir, sha) is not None:
        say(f"{out_dir} already holds this conversion (sha256 {sha[:16]}...): reusing it")
        return out_dir
    if out_dir.exists():
        raise ModelSourceError(
            f"{out_dir} exists and is not a finished conversion of {gguf_path.name} (no "
            f"{MANIFEST} with sha256 {sha[:16]}...); remove it, or choose another folder"
        )
    _require_gguf()
    architecture = _architecture(gguf_path)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # beside its destination (one file system: the rename is atomic), made with the umask's mode
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        say(
            f"reading {gguf_path.name} and dequantising its weights to float32 (SmolLM2-135M: "
            "about 30 s on 2 cores)"
        )
        model, tokenizer = _load_gguf(gguf_path)
        say(f"writing the Hugging Face folder ({_size(model)} of float32 safetensors)")
        _save_plain(model, staging)
        tokenizer.save_pretrained(str(staging))
        manifest = {
            "source_file": gguf_path.name,
            "sha256": sha,
            "architecture": architecture,
            "weights": "dequantised to float32 from the GGUF's tensors (a quantised GGUF "
            "stays a degraded copy of its original model)",
            **_versions(),
            **dict(source or {}),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        try:
            os.rename(staging, out_dir)
        except OSError:
            if finished_conversion(out_dir, sha) is None:  # not a concurrent twin's: a real error
                raise
            log.info("%s was converted meanwhile by another process: using that", out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _require_gguf() -> None:
    if missing_package("gguf"):
        raise ModelSourceError(
            f"reading a GGUF file needs the gguf package, not installed here: {GGUF_INSTALL}"
        )


def _unreadable(path: Path, exc: BaseException) -> str:
    return (
        f"{path}: not a GGUF file transformers can read ({type(exc).__name__}: {exc}); the file "
        "may be truncated or corrupt: download it again"
    )


def _architecture(path: Path) -> str:
    """The file's ``general.architecture``, checked against those transformers reads from GGUF.

    Raises:
        ModelSourceError: not a GGUF file, or an architecture transformers cannot read.
    """
    from gguf import GGUFReader
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        field = GGUFReader(str(path)).fields.get("general.architecture")
        architecture = str(field.contents()) if field is not None else ""
    except (ValueError, KeyError, IndexError, OSError) as exc:  # bad magic, truncated
        raise ModelSourceError(_unreadable(path, exc)) from None
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        import transformers

        raise ModelSourceError(
            f"{path.name}: architecture {architecture or '(none given)'!r} cannot be read from "
            f"GGUF by transformers {transformers.__version__}, which reads "
            f"{', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))}; use the model's original "
            "Hugging Face checkpoint instead (or a newer transformers)"
        )
    return architecture


def _load_gguf(path: Path) -> tuple[Any, Any]:
    """The model (float32) and tokenizer as transformers loads them from the GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(path.parent), path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32, local_files_only=True
        )
    except (ValueError, KeyError, NotImplementedError) as exc:  # a model, tokenizer it lacks
        raise ModelSourceError(
            f"{path.name}: transformers could not load it as a causal language model "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return model, tokenizer


def _save_plain(model: Any, folder: Path) -> None:
    """Saves ``model``'s weights as a plain (not GGUF-quantised) model of the same config: the
    one transformers loaded refuses ``save_pretrained``. The plain model is built on the meta
    device and takes the loaded tensors (``assign``), so no second copy of the weights is made."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()  # assign replaced the tied head's tensor by the loaded one
    plain.save_pretrained(str(folder))


def _size(model: Any) -> str:
    count = sum(p.numel() for p in model.parameters())
    return f"{count * 4 / 1e6:,.0f} MB" if count * 4 < 1e9 else f"{count * 4 / 1e9:,.1f} GB"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"transformers": version("transformers"), "gguf": version("gguf")}
