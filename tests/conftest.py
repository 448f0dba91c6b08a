"""Fixtures shared by test folders."""

import pytest
import torch


@pytest.fixture
def fresh_dynamo():
    """Each test compiles from scratch: no graph or guard cached by an earlier test."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
