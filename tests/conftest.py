import warnings

import pytest

from dpframe.errors import UnsafeSeedWarning


@pytest.fixture(autouse=True)
def _quiet_seed_warning():
    """Tests seed their noise on purpose; the warning is tested in test_random.py."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSeedWarning)
        yield
