"""Install one distribution the way a user would (not editable), for tox: python tools/tox_install.py DOMAIN."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEEDS = {"llm": ["neuro"]}  # sibling distributions not on PyPI yet

domain = sys.argv[1]
wanted = ["core"] + ([] if domain == "core" else [*NEEDS.get(domain, []), domain])
paths = [str(ROOT / "packages" / f"iclr25-{d}") for d in wanted]
subprocess.run([sys.executable, "-m", "pip", "install", "-q", *paths, "pytest>=8", "hypothesis>=6"], check=True)
