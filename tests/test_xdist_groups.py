"""The suite's ``xdist_group`` marks reach pytest-xdist's scheduler: under ``--dist loadgroup``
(``make test``) a grouped test's node id carries its group, so that every test of the group runs
on one worker (one local Ray, one OpenEnv import, one behaviour clone). pytest 9.2 with
pytest-xdist 3.8 drops the groups without a word (pytest-dev/pytest-xdist#1386)."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("xdist-check")
def test_a_grouped_test_is_scheduled_with_its_group(request: pytest.FixtureRequest) -> None:
    if getattr(request.config, "workerinput", None) is None:
        pytest.skip("not a pytest-xdist worker: no scheduler to group tests")
    if not getattr(request.config.option, "loadgroup", False):  # what a worker is told
        pytest.skip("groups are scheduled by --dist loadgroup only")
    assert request.node.nodeid.endswith("@xdist-check"), (
        f"{request.node.nodeid}: pytest-xdist lost the xdist_group mark; pin a pytest it works "
        "with (pyproject.toml's dev extra)"
    )
