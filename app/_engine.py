"""The engine names the app uses, in one place (the app imports nothing else from ``engine``).

Everything here is ``engine``'s public ``__all__``, re-exported as it is.
"""

from __future__ import annotations

import engine
from engine import *  # noqa: F403 - the app sees exactly engine.__all__

__all__ = list(engine.__all__)
