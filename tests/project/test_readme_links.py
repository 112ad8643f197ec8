"""The README is the landing page and points into docs/ for everything else: each of its relative links
must lead to a file of the repository. (The docs' own links are checked by the strict Sphinx build in
scripts/docs.sh; the README is not part of that build.)"""

import re
from tests_common.paths import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """The link targets that are paths in the repository (no URL, no in-page anchor), without anchors."""
    targets = (target.split("#", 1)[0] for target in LINK.findall(markdown))
    return [target for target in targets if target and "://" not in target]


def test_relative_links_in_the_readme_lead_to_files():
    links = relative_links((REPO / "README.md").read_text())
    assert "docs/index.md" in links, "the README no longer points at the docs"
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_a_link_to_a_missing_page_is_found():
    assert relative_links("[a](docs/x.md#part) [b](https://example.com) [c](#here)") == ["docs/x.md"]
