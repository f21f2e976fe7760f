"""Suite-wide test configuration: the one place Hypothesis profiles are defined.

"ci" is deterministic (derandomized, no example database), prints a reproduction blob on failure and
tolerates slow examples; "dev" keeps Hypothesis' randomness. Neither has a deadline: run times of
I/O-heavy and assignor examples vary too much with machine load for a deadline to be honest. CI sets
the ``CI`` environment variable; ``HYPOTHESIS_PROFILE`` overrides the choice.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
