"""``dpframe.pram``: :mod:`dpframe.polars.pram` (PRAM), by its public name.

``import dpframe.pram`` and ``from dpframe.pram import ...`` give that module itself
(this file puts it in its own place in ``sys.modules``); the attribute ``dpframe.pram``
loads it on first use.
"""

import sys

from dpframe.polars import pram as _module
from dpframe.polars.pram import *  # noqa: F403  (what a static reader, e.g. the reference site, sees)
from dpframe.polars.pram import __all__ as __all__

sys.modules[__name__] = _module
