"""Shared test set-up: every test session gets its own divelab cache, so tests never read a
developer's cached models and never leave files behind."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DIVELAB_QUIET", "1")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    if "DIVELAB_TEST_CACHE" in os.environ:  # reuse a warm cache on purpose, e.g. while developing
        os.environ["DIVELAB_CACHE"] = os.environ["DIVELAB_TEST_CACHE"]
    else:
        os.environ["DIVELAB_CACHE"] = str(tmp_path_factory.mktemp("divelab-cache"))
