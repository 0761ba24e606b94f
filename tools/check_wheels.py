"""Check built wheels: the iclr25 namespace stays PEP 420 and every domain ships its cards.

Usage: python tools/check_wheels.py DIST_DIR   (exit 1 with a list of problems)
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DOMAINS = ["core", "neuro", "compress", "theory", "rl", "generative", "llm"]


def problems(dist: Path) -> list[str]:
    found: list[str] = []
    wheels = {w.name.split("-")[0]: w for w in dist.glob("*.whl")}
    for domain in DOMAINS:
        wheel = wheels.get(f"iclr25_{domain}")
        if wheel is None:
            found.append(f"no wheel for iclr25-{domain} in {dist}")
            continue
        names = zipfile.ZipFile(wheel).namelist()
        if "iclr25/__init__.py" in names:
            found.append(f"{wheel.name} ships iclr25/__init__.py, which breaks the shared namespace")
        stray = sorted({n.split("/")[1] for n in names if n.startswith("iclr25/") and n.count("/") > 1} - {domain})
        if stray:
            found.append(f"{wheel.name} ships other domains' code: {stray}")
        if f"iclr25/{domain}/py.typed" not in names:
            found.append(f"{wheel.name} lacks iclr25/{domain}/py.typed")
        if domain != "core" and not any(n.startswith(f"iclr25/{domain}/cards/") and n.endswith(".toml") for n in names):
            found.append(f"{wheel.name} ships no cards")
    return found


if __name__ == "__main__":
    issues = problems(Path(sys.argv[1]))
    for line in issues:
        print(f"check_wheels: {line}")
    print(f"check_wheels: {len(list(Path(sys.argv[1]).glob('*.whl')))} wheels checked, {len(issues)} problem(s)")
    sys.exit(1 if issues else 0)
