"""The figures the docs give as the latest measurements are the ones ``bench/results/latest.json``
records (issue 37 §5): each is marked with the place it is recorded (:mod:`tests_common.doc_figures`)."""

from __future__ import annotations

import json

from tests_common.doc_figures import LATEST, drift, marked_figures


def test_every_marked_figure_is_the_recorded_one():
    assert drift() == []


def test_the_pages_that_claim_latest_figures_mark_them():
    pages = {f.page.relative_to(LATEST.parents[2]).as_posix() for f in marked_figures()}
    assert {"docs/guides/live-syncs.md", "bench/README.md"} <= pages
    assert any(f.path == "8/figures/live_noop_run_s" for f in marked_figures())  # the idle run's cost


def test_a_figure_that_is_not_the_recorded_one_is_found():
    [idle, *_] = [f for f in marked_figures() if f.path == "8/figures/live_noop_run_s"]
    changed = json.loads(LATEST.read_text())
    changed["runs"][0]["scenarios"]["8"]["figures"]["live_noop_run_s"] = float(idle.shown) + 5
    assert f"{idle.where()}: shown {idle.shown}, recorded {float(idle.shown) + 5:.2f}" in "\n".join(drift(changed))
