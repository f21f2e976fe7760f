"""Hypothesis profiles for the record log tests, unless a conftest above already registered them.

``dev``: the default locally. ``ci``: derandomized (the same examples every run), no example
database, modest example counts. ``deadline=None`` in both: I/O-heavy examples vary too much with
machine load for a deadline to be honest. Choose with ``HYPOTHESIS_PROFILE=dev|ci``. (Hypothesis
has a built-in ``ci`` profile it selects on CI machines, so registration is keyed on ``dev``.)
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

try:
    settings.get_profile("dev")
except InvalidArgument:
    settings.register_profile("dev", deadline=None, max_examples=100)
    settings.register_profile(
        "ci",
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        max_examples=100,
        suppress_health_check=[HealthCheck.too_slow],
    )
    _default = "ci" if settings.get_current_profile_name() == "ci" else "dev"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))
