"""pyproject.toml as the build backend reads it: the license is an SPDX expression (the TOML-table
form is deprecated and stops building in 2027), and the build requires a setuptools that knows
that form."""

from __future__ import annotations

import tomllib
import warnings

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.ops.lockfile import ROOT

PYPROJECT = ROOT / "pyproject.toml"
SPDX_SETUPTOOLS = Version("77")
"""The first setuptools that reads `project.license` as an SPDX expression (PEP 639)."""


def test_license_is_an_spdx_expression() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["license"] == "Apache-2.0"


def test_the_build_requires_a_setuptools_that_reads_spdx_licenses() -> None:
    requires = [Requirement(r) for r in tomllib.loads(PYPROJECT.read_text())["build-system"]["requires"]]
    (setuptools,) = [r for r in requires if r.name == "setuptools"]
    lowest = min(Version(s.version) for s in setuptools.specifier if s.operator in (">=", "=="))
    assert lowest >= SPDX_SETUPTOOLS, setuptools


def test_the_build_backend_applies_pyproject_without_a_deprecation_warning() -> None:
    import setuptools
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    if Version(setuptools.__version__) < SPDX_SETUPTOOLS:
        pytest.skip(f"setuptools {setuptools.__version__} predates SPDX licenses (./dev test installs >= 77)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SetuptoolsDeprecationWarning for a license table
        distribution = apply_configuration(Distribution(), str(PYPROJECT))
    assert distribution.metadata.license_expression == "Apache-2.0"
