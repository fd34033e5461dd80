"""``dpframe.sensitivity``: :mod:`dpframe.core.sensitivity` (sensitivities), by its public name.

``import dpframe.sensitivity`` and ``from dpframe.sensitivity import ...`` give that module itself
(this file puts it in its own place in ``sys.modules``); the attribute ``dpframe.sensitivity``
loads it on first use.
"""

import sys

from dpframe.core import sensitivity as _module
from dpframe.core.sensitivity import *  # noqa: F403  (what a static reader, e.g. the reference site, sees)
from dpframe.core.sensitivity import __all__ as __all__

sys.modules[__name__] = _module
