"""One shared torch install for every test environment (nox, tox, .ci/run).

torch with its CUDA libraries is about 6 GB; installing it into each nox/tox environment would
cost minutes and gigabytes per session. Instead a torch-only virtual environment is created once
per Python minor version (``$ICLR25_CACHE/torch-pyX.Y``, default cache ``~/.cache/iclr25``), and
each test environment gets a ``.pth`` file that appends that environment's site-packages to its
``sys.path``. pip sees torch as installed (so ``torch>=2.1`` requirements are satisfied) while
every other dependency is installed into the test environment itself, so an undeclared
dependency still fails the stand-alone check. The torch environment holds only torch,
torchvision, numpy<2 (CompressAI needs it) and what they pull in.

Usage: ``python tools/torchenv.py link [SITE_PACKAGES]`` links the running interpreter's
environment (or the given site-packages directory), creating the torch environment if needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

TORCH_SPEC = os.environ.get("ICLR25_TORCH_SPEC", "torch==2.14.1 torchvision==0.29.1 numpy<2").split()
PTH_NAME = "_iclr25_shared_torch.pth"


def cache_dir() -> Path:
    return Path(os.environ.get("ICLR25_CACHE", Path.home() / ".cache" / "iclr25"))


def torch_env(python: str = sys.executable) -> Path:
    """Path of the shared torch environment for ``python``'s minor version, created if missing."""
    version = subprocess.run(
        [python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = cache_dir() / f"torch-py{version}"
    env_python = env / "bin" / "python"
    probe = [str(env_python), "-c", "import torch, torchvision, numpy"]
    if env_python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return env
    print(f"[torchenv] creating the shared torch environment {env} ({' '.join(TORCH_SPEC)})", flush=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "venv", "--clear", str(env)], check=True)
    subprocess.run([str(env_python), "-m", "pip", "install", "-q", *TORCH_SPEC], check=True)
    subprocess.run(probe, check=True)
    return env


def site_packages(env: Path) -> Path:
    out = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out)


def link(target_site: str | Path | None = None, python: str = sys.executable) -> Path:
    """Write the .pth that makes the shared torch importable from ``target_site``."""
    target = Path(target_site) if target_site else Path(sysconfig.get_paths()["purelib"])
    shared = site_packages(torch_env(python))
    (target / PTH_NAME).write_text(f"{shared}\n", encoding="utf-8")
    return shared


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "link":
        sys.exit("usage: python tools/torchenv.py link [SITE_PACKAGES]")
    print(f"[torchenv] torch from {link(sys.argv[2] if len(sys.argv) > 2 else None)}")
