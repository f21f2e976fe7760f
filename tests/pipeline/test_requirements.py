"""Without Java the pipeline tests skip with the reason, even the slow cluster test named on its
own (a skip raised while pytest loads a conftest is reported as a traceback, not a skip)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.ops.lockfile import ROOT


def test_the_slow_cluster_test_skips_without_java(tmp_path) -> None:
    no_java = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    no_java["PATH"] = str(tmp_path)  # an empty directory: no `java` anywhere on PATH
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "slow", "-q", "-p", "no:cacheprovider",
         "tests/pipeline/test_cluster.py"],
        cwd=ROOT, env=no_java, capture_output=True, text=True, timeout=120,
    )
    output = result.stdout + result.stderr
    # 5: no test collected, which is how pytest ends a run whose only module was skipped whole
    assert result.returncode in (0, 5), output
    assert "1 skipped" in output, output
    assert "need Java 17+" in output, output
    assert "Traceback" not in output, output
