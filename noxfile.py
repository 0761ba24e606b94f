"""Sessions for the whole repository (``nox -l`` lists them).

    nox -s tests                    every distribution's tests in one environment
    nox -s tests_isolated           each distribution installed alone (not editable) from a temp dir
    nox -s "tests_isolated(package='compress')"
    nox -s cross                    cross-package tests (tests/)
    nox -s lint | docs | build | reproduce

Plain ``nox`` runs the default set: lint, tests, tests_isolated, cross, build, docs. torch is shared across
sessions through tools/torchenv.py (a .pth into one torch-only environment), never reinstalled.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
DOMAINS = ["core", "neuro", "compress", "theory", "rl", "generative", "llm"]
PACKAGES = [f"packages/iclr25-{d}" for d in DOMAINS]
TEST_DEPS = ["pytest>=8", "hypothesis>=6"]
# optional extras exercised when everything is installed together (the isolated runs skip those tests)
EXTRAS = {
    "packages/iclr25-llm": "packages/iclr25-llm[hf]",
    "packages/iclr25-generative": "packages/iclr25-generative[text,topo]",
    "packages/iclr25-rl": "packages/iclr25-rl[openspiel]",
}

nox.options.sessions = ["lint", "tests", "tests_isolated", "cross", "build", "docs"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True


def _with_shared_torch(session: nox.Session) -> None:
    session.run("python", str(ROOT / "tools" / "torchenv.py"), "link", silent=False)


def _install_all(session: nox.Session, editable: bool = True) -> None:
    _with_shared_torch(session)
    args = []
    for pkg in PACKAGES:
        pkg = EXTRAS.get(pkg, pkg)
        args += ["-e", pkg] if editable else [pkg]
    session.install(*args, *TEST_DEPS)


@nox.session
def tests(session: nox.Session) -> None:
    """All seven distributions in one environment; every package's default (fast) tests."""
    _install_all(session)
    session.run("pytest", *PACKAGES, *session.posargs)


@nox.session
@nox.parametrize("package", DOMAINS)
def tests_isolated(session: nox.Session, package: str) -> None:
    """One distribution installed alone (plus iclr25-core and its declared dependencies).

    The tests are copied to a temp dir and run with --import-mode=importlib, so an undeclared
    dependency, a sibling import or a stray iclr25/__init__.py fails here.
    """
    _with_shared_torch(session)
    wanted = ["packages/iclr25-core"] if package == "core" else ["packages/iclr25-core", f"packages/iclr25-{package}"]
    if package == "llm":  # llm depends on iclr25-neuro, which is not on PyPI yet
        wanted.append("packages/iclr25-neuro")
    session.install(*wanted, *TEST_DEPS)
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "tests"
        shutil.copytree(ROOT / f"packages/iclr25-{package}/tests", dest)
        session.chdir(tmp)
        session.run(
            "pytest",
            "-p",
            "iclr25.core.testing",
            "--strict-markers",
            "--import-mode=importlib",
            "-m",
            "not slow and not bench",
            "-ra",
            "tests",
            *session.posargs,
        )


@nox.session
def cross(session: nox.Session) -> None:
    """Cross-package tests: all distributions together, cards vs experiments, wheels, CLI."""
    _install_all(session)
    session.install("hatchling>=1.21")
    session.run("pytest", "tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Strict mkdocs build (griffe reads the sources; torch is not needed)."""
    session.install("mkdocs-material>=9.5", "mkdocstrings[python]>=0.26")
    session.run("mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site"))


@nox.session
def build(session: nox.Session) -> None:
    """Wheels and sdists for all seven distributions; metadata and wheel-contents checks."""
    session.install("build>=1.0", "twine>=5", "hatchling>=1.21")
    out = Path(session.create_tmp()) / "dist"
    shutil.rmtree(out, ignore_errors=True)
    for pkg in PACKAGES:
        session.run("python", "-m", "build", "--no-isolation", "--outdir", str(out), pkg)
    session.run("twine", "check", "--strict", *[str(p) for p in sorted(out.iterdir())])
    session.run("python", str(ROOT / "tools" / "check_wheels.py"), str(out))


@nox.session
def reproduce(session: nox.Session) -> None:
    """Every installed paper's quick reproduction, printed as one table."""
    _install_all(session, editable=False)
    out = Path(session.create_tmp()) / "results"
    session.run("iclr25", "reproduce", "--all", "--quick", "--out", str(out), *session.posargs)
