"""``dpframe.agg``: :mod:`dpframe.mechanisms.statistics` (statistics), by its public name.

``import dpframe.agg`` and ``from dpframe.agg import ...`` give that module itself
(this file puts it in its own place in ``sys.modules``); the attribute ``dpframe.agg``
loads it on first use.
"""

import sys

from dpframe.mechanisms import statistics as _module
from dpframe.mechanisms.statistics import *  # noqa: F403  (what a static reader, e.g. the reference site, sees)
from dpframe.mechanisms.statistics import __all__ as __all__

sys.modules[__name__] = _module
