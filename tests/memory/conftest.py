"""Memory tests: a fixed hypothesis profile so property tests are reproducible in CI."""

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=300, derandomize=True, deadline=None)
if os.environ.get("HYPOTHESIS_PROFILE") == "ci":
    settings.load_profile("ci")
