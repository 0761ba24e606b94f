"""Acceptance: each distribution installs alone, and all seven install together.

Builds wheels into a temp dir, installs them into fresh virtual environments (torch shared via
tools/torchenv.py, everything else from the package index) and checks what imports.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ["core", "neuro", "compress", "theory", "rl", "generative", "llm"]


def sh(*args, cwd=None):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, f"{args}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def imports(python, module):
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheels")
    sh(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out,
        *[ROOT / "packages" / f"iclr25-{d}" for d in DOMAINS],
    )  # fmt: skip
    built = {w.name.split("-")[0].removeprefix("iclr25_"): w for w in out.glob("*.whl")}
    assert set(built) == set(DOMAINS)
    return built


def test_one_domain_alone_then_all_seven(wheels, tmp_path):
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    sh(python, ROOT / "tools" / "torchenv.py", "link")
    sh(python, "-m", "pip", "install", "-q", wheels["core"], wheels["compress"])

    assert imports(python, "iclr25.core, iclr25.compress").returncode == 0
    missing = imports(python, "iclr25.llm")
    assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr
    listed = sh(venv / "bin" / "iclr25", "list")
    assert "iclr25-compress" in listed and "iclr25-llm" not in listed

    sh(python, "-m", "pip", "install", "-q", *[wheels[d] for d in DOMAINS])
    everything = ", ".join(f"iclr25.{d}" for d in DOMAINS)
    result = imports(python, everything)
    assert result.returncode == 0, result.stderr
    assert "38 papers" in sh(venv / "bin" / "iclr25", "list")
