"""Every ``python`` code block in the paper docs pages and the package READMEs runs as written.

The docs promise a runnable example per paper; nothing else executes those blocks, so an API change
that breaks one would otherwise reach users unnoticed. A page's blocks run in order in one fresh
interpreter and share one namespace, as a reader pasting them into one session would. A block
preceded by the line ``<!-- docs-test: slow -->`` is run only with ``-m slow``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLOW_MARK = "<!-- docs-test: slow -->"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[str, bool]]:
    """``(code, is_slow)`` for every fenced ``python`` block of a Markdown text, in order."""
    blocks = []
    for m in _BLOCK.finditer(text):
        before = text[: m.start()].rstrip().splitlines()
        blocks.append((m.group(1), bool(before) and before[-1].strip() == SLOW_MARK))
    return blocks


def _pages() -> list[Path]:
    papers = [p for p in sorted((ROOT / "docs" / "papers").glob("*.md")) if not p.name.startswith("_")]
    return papers + sorted(ROOT.glob("packages/*/README.md"))


def _params():
    for page in _pages():
        blocks = python_blocks(page.read_text(encoding="utf-8"))
        if not blocks:
            continue
        rel = page.relative_to(ROOT).as_posix()
        yield pytest.param(page, False, id=rel)
        if any(slow for _, slow in blocks):
            yield pytest.param(page, True, id=rel + "[slow]", marks=pytest.mark.slow)


def _script(blocks: list[tuple[str, bool]], with_slow: bool) -> str:
    parts = ["import torch\ntorch.set_num_threads(1)\n"]
    for i, (code, slow) in enumerate(blocks):
        if slow and not with_slow:
            continue
        # compile each block under its own name so a traceback says which block failed
        parts.append(f"exec(compile({code!r}, 'block {i}', 'exec'))\n")
    return "".join(parts)


@pytest.mark.parametrize(("page", "with_slow"), list(_params()))
def test_code_blocks_run(page: Path, with_slow: bool, tmp_path: Path) -> None:
    script = _script(python_blocks(page.read_text(encoding="utf-8")), with_slow)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{page.name}:\n{result.stderr[-4000:]}"


def test_block_parser_reads_order_and_slow_marks() -> None:
    text = (
        "intro\n```python\na = 1\n```\ntext\n" + SLOW_MARK + "\n\n```python\nb = a\n```\n```bash\nls\n```\n"
        "```python\nc = 2\n```\n"
    )
    assert python_blocks(text) == [("a = 1\n", False), ("b = a\n", True), ("c = 2\n", False)]


def test_every_paper_page_has_a_runnable_example() -> None:
    missing = [p.name for p in _pages() if p.parent.name == "papers" and p.name != "index.md"]
    missing = [n for n in missing if not python_blocks((ROOT / "docs" / "papers" / n).read_text(encoding="utf-8"))]
    assert missing == []
