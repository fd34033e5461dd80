"""docs/architecture.md's tree of the package is the package: every module it names exists,
and every module of ``dpframe/`` is in it (a new module is added to the page with its layer)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"


def _tree_block() -> list[str]:
    """The lines of the page's code block that starts with ``dpframe/``."""
    blocks = re.findall(r"```\n(dpframe/\n.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1, "docs/architecture.md must hold one tree block starting 'dpframe/'"
    return blocks[0].splitlines()[1:]


def shown_modules() -> set[str]:
    """The modules the tree shows, as paths relative to ``dpframe/`` without ``.py``.

    A line ``  folder/  a  b`` names ``folder/a`` and ``folder/b``; a line without a folder
    continues the previous folder's list; ``sub/{x, y}`` names ``folder/sub/x`` and
    ``folder/sub/y``; a line of top-level names (``errors.py  cli.py``) names modules of the
    package's root.
    """
    shown: set[str] = set()
    folder = ""
    for line in _tree_block():
        text = re.sub(r"\{([^}]*)\}", lambda m: "{" + m.group(1).replace(" ", "") + "}", line)
        words = text.split()
        if not words:
            continue
        if words[0].endswith("/"):
            folder, words = words[0], words[1:]
        elif words[0].endswith(".py"):
            folder = ""
        for word in words:
            if "{" in word:
                sub, names = word.split("{")
                for name in names.rstrip("}").split(","):
                    shown.add(f"{folder}{sub}{name}")
            else:
                shown.add(folder + word.removesuffix(".py"))
    return shown


def package_modules() -> set[str]:
    """Every module of the package (``__init__`` files and private tools aside)."""
    package = ROOT / "dpframe"
    return {
        str(p.relative_to(package).with_suffix(""))
        for p in package.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def test_the_architecture_page_shows_the_package_tree() -> None:
    shown, real = shown_modules(), package_modules()
    assert not shown - real, f"the page shows modules that do not exist: {sorted(shown - real)}"
    assert not real - shown, f"modules missing from the page's tree: {sorted(real - shown)}"
