"""The map matches the territory: every module of bot/ is named in its package's docstring and in docs/design.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "bot"


def _packages() -> list[Path]:
    return sorted(p.parent for p in BOT.rglob("__init__.py") if "__pycache__" not in p.parts and p.parent != BOT)


def _modules(package: Path) -> list[str]:
    """The package's own modules and subpackages (``__init__`` and ``__main__`` aside)."""
    names = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    return sorted(names)


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) is not None


def test_every_package_docstring_lists_its_modules() -> None:
    missing: list[str] = []
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
        missing += [f"{package.relative_to(ROOT)}/{m}" for m in _modules(package) if not _named(m, doc)]
    assert not missing, f"not named in their package's __init__ docstring: {missing}"


def test_the_design_notes_name_every_module() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    missing = [
        f"{package.relative_to(ROOT)}/{m}"
        for package in _packages()
        for m in _modules(package)
        if f"{package.relative_to(BOT)}/{m}".removeprefix("./") not in design
        and f"{package.relative_to(BOT)}/{m}.py".removeprefix("./") not in design
    ]
    assert not missing, f"docs/design.md's feature index names none of: {missing}"


def test_comments_cite_no_issue_numbers_and_no_outside_files() -> None:
    bad = []
    for path in sorted(BOT.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(?i)\bissue\s*#?\d+|\.\./shared/|spec/CONTRACT\.md", line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, bad
