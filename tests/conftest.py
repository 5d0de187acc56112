import sys

import pytest
import torch

# jsonschema (under nbformat) builds a grammar for its optional IRI format checks on import, a second of every
# process's start; nbformat validates notebooks without them. (Where nbval's plugin is loaded, it has imported
# them before this file: make quick runs without it.)
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state, whatever ran before it."""
    torch.manual_seed(0)
