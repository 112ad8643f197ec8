"""The published constraints (constraints/constraints-<python>.txt) are the versions the tests run
against, satisfy the package's own requirements, and keep pandas below 3 (PySpark 4.2 does not
support pandas 3, which an unconstrained install picks)."""

import sys
from configparser import ConfigParser
from importlib.metadata import PackageNotFoundError, version
from tests_common.paths import REPO

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS = REPO / "constraints" / f"constraints-{sys.version_info[0]}.{sys.version_info[1]}.txt"


def pins() -> dict[str, str]:
    lines = [line.strip() for line in CONSTRAINTS.read_text().splitlines()]
    return {canonicalize_name(name): pinned for name, _, pinned in
            (line.partition("==") for line in lines if line and not line.startswith("#"))}


def test_constraints_pin_what_the_tests_run_against():
    pinned = pins()
    assert pinned, CONSTRAINTS
    for name, pinned_version in pinned.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            raise AssertionError(f"{name}=={pinned_version} is constrained but not installed") from None
        assert installed == pinned_version, f"{name}: installed {installed}, constraints say {pinned_version}"


def test_constraints_satisfy_the_package_requirements_and_keep_pandas_below_3():
    setup = ConfigParser()
    setup.read(REPO / "setup.cfg")
    pinned = pins()
    requirements = [Requirement(line) for line in setup["options"]["install_requires"].splitlines()
                    if line.strip() and not line.strip().startswith("#")]
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} has no constraint"
        assert requirement.specifier.contains(pinned[name], prereleases=True), f"{requirement} vs {pinned[name]}"
    assert int(pinned["pandas"].split(".")[0]) < 3
