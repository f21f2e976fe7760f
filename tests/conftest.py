"""Suite-wide test configuration.

Hypothesis profiles: "ci" is deterministic (derandomized, no deadline: shared CI machines are slow
and noisy) and prints a reproduction blob on failure; "dev" keeps Hypothesis' defaults. CI sets the
``CI`` environment variable.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev")
settings.load_profile("ci" if os.environ.get("CI") else "dev")
