import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state, whatever ran before it."""
    torch.manual_seed(0)
