"""Figures in the docs that are the recorded ones: a figure the docs give as the latest measurement
is followed by a marker naming where ``bench/results/latest.json`` records it::

    the p50 is **15.8 s**<!-- latest: 8/figures/live_p50_s -->

(``<scenario>/<figures|ratios|breakdown>/<name>``, inside the latest run's ``scenarios``). The marker
is an HTML comment: Markdown viewers and the docs site show the figure alone. The figure is the last
number before the marker, shown to as many decimals as the page wants; it must be the recorded value
rounded to those. ``tests/project/test_doc_figures.py`` fails on one that is not; after a benchmark
recorded new figures, ``python -m tests_common.doc_figures --write`` writes them into the pages.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests_common.paths import REPO

LATEST = REPO / "bench" / "results" / "latest.json"
#: The pages that give latest figures: the docs site, the README and the benchmarks' README.
PAGES = (REPO / "docs", REPO / "README.md", REPO / "bench" / "README.md")
MARKED = re.compile(r"(?P<number>-?\d[\d,]*(?:\.\d+)?)(?P<tail>[^\d<\n]{0,20}?)<!-- latest: (?P<path>\S+) -->")


@dataclass(frozen=True)
class Figure:
    page: Path
    line: int
    shown: str
    path: str

    def recorded(self, latest: dict[str, Any]) -> Any:
        value: Any = latest["runs"][0]["scenarios"]
        for part in self.path.split("/"):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(f"{self.where()}: latest.json has no {self.path}")
            value = value[part]
        return value

    def as_recorded(self, latest: dict[str, Any]) -> str:
        """The recorded value as this figure shows numbers (its decimals, its thousands separator)."""
        value = float(self.recorded(latest))
        decimals = len(self.shown.partition(".")[2])
        return f"{value:,.{decimals}f}" if "," in self.shown else f"{value:.{decimals}f}"

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    return sorted(p for place in PAGES for p in ([place] if place.is_file() else place.rglob("*.md")))


def marked_figures() -> list[Figure]:
    found = []
    for page in pages():
        for number, line in enumerate(page.read_text().splitlines(), 1):
            found += [Figure(page, number, m["number"], m["path"]) for m in MARKED.finditer(line)]
    return found


def drift(latest: dict[str, Any] | None = None) -> list[str]:
    """``page:line: shown X, recorded Y (path)`` of every marked figure that is not the recorded one."""
    latest = latest or json.loads(LATEST.read_text())
    return [f"{f.where()}: shown {f.shown}, recorded {f.as_recorded(latest)} ({f.path})"
            for f in marked_figures() if f.shown != f.as_recorded(latest)]


def rewrite(latest: dict[str, Any] | None = None) -> int:
    """Write the recorded values into the pages' marked figures; returns how many changed."""
    latest = latest or json.loads(LATEST.read_text())
    changed = 0
    for page in pages():
        text = page.read_text()

        def recorded(match: re.Match[str], page: Path = page) -> str:
            figure = Figure(page, 0, match["number"], match["path"])
            return f"{figure.as_recorded(latest)}{match['tail']}<!-- latest: {match['path']} -->"

        new = MARKED.sub(recorded, text)
        if new != text:
            changed += sum(a != b for a, b in zip(MARKED.findall(text), MARKED.findall(new)))
            page.write_text(new)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the recorded figures into the pages")
    args = parser.parse_args(argv)
    if args.write:
        print(f"doc figures: {rewrite()} updated")
        return 0
    problems = drift()
    print("\n".join(problems) or f"doc figures: all {len(marked_figures())} are the recorded ones")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
