"""docs/architecture.svg, the picture on the docs' front page, against the code: it is an SVG,
its refresh stages are the README's, in the README's order, and every module it names
exists."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PICTURE = ROOT / "docs" / "architecture.svg"
PACKAGE = ROOT / "daemon" / "icemv"
SVG = "{http://www.w3.org/2000/svg}"


def _texts() -> list[str]:
    root = ET.parse(PICTURE).getroot()
    assert root.tag == f"{SVG}svg"
    return [element.text or "" for element in root.iter(f"{SVG}text")]


def named_paths(texts: list[str]) -> list[str]:
    """Module paths the texts name; `poller.py` after `service/consumer.py,` is in service/."""
    paths, folder = [], ""
    for text in texts:
        for token in re.findall(r"[\w/]+(?:\.py|/)", text):
            if "/" in token.rstrip("/") or token.endswith("/"):
                folder = token.rsplit("/", 1)[0] + "/" if not token.endswith("/") else ""
                paths.append(token)
            else:
                paths.append(folder + token)
    return paths


def test_the_stages_are_the_readmes_in_order() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## In 30 seconds") :]
    stages = re.findall(r"^  (\w+) {2,}", block[: block.index("```\n\n")], re.M)
    assert stages == ["trigger", "route", "plan", "changes", "patch", "commit", "record"]
    texts = _texts()
    assert [t for t in texts if t in stages] == stages


def test_every_module_it_names_exists() -> None:
    paths = [p for p in named_paths(_texts()) if p != "daemon/icemv/"]
    assert len(paths) >= 10, paths
    missing = [p for p in paths if not (PACKAGE / p).exists()]
    assert not missing, f"docs/architecture.svg names modules that do not exist: {missing}"


def test_a_module_name_is_read_with_its_folder() -> None:
    assert named_paths(["service/consumer.py,", "poller.py, http.py", "refresh/patch/"]) == [
        "service/consumer.py",
        "service/poller.py",
        "service/http.py",
        "refresh/patch/",
    ]
