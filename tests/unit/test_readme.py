"""The README is a landing page: short, and its links into the docs lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.unit.docs_hooks import DOCS, ROOT

README = ROOT / "README.md"
MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(item) for item in nav))
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(item) for item in nav.values()))
    return set()


def _local_links() -> list[str]:
    links = LINK.findall(README.read_text(encoding="utf-8"))
    return [link for link in links if "://" not in link and not link.startswith("#")]


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_every_docs_link_points_at_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = _nav_pages(config["nav"])
    docs_links = [link for link in _local_links() if link.startswith("docs/")]
    assert docs_links, "the README links into the docs"
    for link in docs_links:
        target = link.split("#", 1)[0]
        assert (ROOT / target).is_file(), f"README links to missing {target}"
        relative = Path(target).relative_to("docs").as_posix()
        if relative.endswith(".md"):
            assert relative in pages, f"README links to {target}, not in mkdocs.yml's nav"


def test_every_other_local_link_exists() -> None:
    for link in _local_links():
        target = link.split("#", 1)[0]
        assert (ROOT / target).exists(), f"README links to missing {target}"


def test_the_docs_site_pages_exist() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    generated = {"operations.md"}  # docs/hooks.py publishes deploy/OPERATIONS.md
    for page in _nav_pages(config["nav"]) - generated:
        assert (DOCS / page).is_file(), page
