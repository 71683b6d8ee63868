"""Fixtures of the frontend tests: the embedded model (as in ``tests/engine``) and a frontend
``Engine`` backend over it."""

from __future__ import annotations

import pytest

from tests.engine.conftest import llm, loaded_model  # noqa: F401  (fixtures)


@pytest.fixture(scope="session")
def engine_backend(llm):  # noqa: F811
    from leapgen.frontend import Engine

    return Engine(llm=llm)
