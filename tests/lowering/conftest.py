"""Lowering tests cache kernel sources in a temporary folder, never in the user's ~/.cache."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _kernel_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FUSEC_CACHE_DIR", str(tmp_path_factory.mktemp("fusec_cache")))
        yield
