"""The docs stay true to themselves: every relative link and ``#anchor`` in README.md and docs/*.md resolves,
textual references to a README section ("README, "Several daemons"") name one that exists, and docs/config.md
lists every key of the config model (and no key the model lacks)."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from bot.config import Config

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
README_REF = re.compile(
    r'README[,:]?\s+"([^"]+)"|"([^"]+)"\s+(?:section\s+)?(?:in|of)\s+the\s+README'
    r"|[Ss]ee(?:\s+also)?\s+the\s+([^(),.;:]+?)\s+in\s+the\s+README",
    re.S,
)


def prose(path: Path) -> str:
    """The file without its fenced code blocks (links there are examples)."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [m.group(2).strip() for m in re.finditer(r"^(#{1,6})\s+(.*)$", prose(path), re.M)]


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(path):
        a = anchor(h)
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def links() -> Iterator[tuple[Path, str]]:
    for doc in DOCS:
        for m in LINK.finditer(prose(doc)):
            target = m.group(1) or m.group(2)
            if not re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                yield doc, target


@pytest.mark.parametrize(("doc", "target"), list(links()), ids=lambda x: str(x)[-40:])
def test_every_relative_link_and_anchor_resolves(doc: Path, target: str) -> None:
    path, _, frag = target.partition("#")
    dest = (doc.parent / path).resolve() if path else doc
    assert dest.exists(), f"{doc.name}: {target}: no such file"
    if frag:
        assert dest.suffix == ".md", f"{doc.name}: {target}: an anchor into a file that is not Markdown"
        assert frag in anchors(dest), f"{doc.name}: {target}: no heading #{frag} in {dest.name}"


def test_references_to_readme_sections_name_existing_ones() -> None:
    readme = {anchor(h) for h in headings(ROOT / "README.md")}
    bad = []
    for doc in [*DOCS, ROOT / "config.example.toml"]:
        for m in README_REF.finditer(doc.read_text()):
            name = m.group(1) or m.group(2) or m.group(3)
            if anchor(name) not in readme:
                bad.append(f"{doc.name}: README section {name!r}")
    assert not bad, bad


def model_keys(model: type[pydantic.BaseModel], prefix: str = "") -> set[str]:
    """Every key of ``model``, dotted (``matrix.trust``, ``api.tokens.name``), tables included."""
    out = set()
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        out.add(key)
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            for sub in typing.get_args(arg) or (arg,):
                if isinstance(sub, type) and issubclass(sub, pydantic.BaseModel):
                    out |= model_keys(sub, key + ".")
    return out


def documented_keys() -> set[str]:
    """The keys named in the first column of docs/config.md's table (``[[rooms]]`` as ``rooms``,
    ``api.tokens[].name`` as ``api.tokens.name``, ``.device_id`` after a key as its sibling)."""
    out = set()
    for line in (ROOT / "docs" / "config.md").read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| key "):
            continue
        last = ""
        for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
            name = name.strip("[]").replace("[]", "")
            if name.startswith(".") and last:
                name = last.rsplit(".", 1)[0] + name
            out.add(name)
            last = name
    return out


def test_the_config_docs_list_every_key_of_the_config_model() -> None:
    want = model_keys(Config)
    have = documented_keys()
    rules = {k for k in have if k.startswith("rules.")}  # checked by bot.inbox.rules, not the config model
    assert want - have == set(), f"keys docs/config.md does not list: {sorted(want - have)}"
    extra = have - want - rules
    assert extra == set(), f"keys docs/config.md lists that the config lacks: {sorted(extra)}"
