"""The app asks for I-DiPT's prompted decisions when its review reaches them (issue 41 item 1),
without a display: the controller with a fake worker and a real review desk.

The worker leaves them pending (``prompted="on-demand"``); the review tests the rules before that
candidate, then waits: the controller asks the worker for them (in a run of their own when none goes
on) and says so, a result that brings one replaces its image's row and keeps its overlay, the maps'
count and the run's work unchanged, and the queue goes on by itself once every one is made.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from app_fixtures import make_folder
from app_studio import RUN_TIMEOUT_MS, Studio
from controller_fakes import CLASSES, ended, make, session_info
from review_rows import site_rows

from app.core.messages import ItemResult, SourceOpened
from app.core.overlay import Overlay
from app.core.phase import Phase
from engine import FolderSource, StreamItem
from engine.review.ladder import PROMPTED
from engine.run.review_outlook import IN_THE_APP, outlook
from engine.run.rows import MAP_PENDING
from engine.vocabulary import QueueEmpty
from lab.reviewer import answer_queue


def test_the_review_reaching_the_prompted_candidate_has_its_decisions_made(tmp_path: Path) -> None:
    rows, labels = site_rows(60)
    root = tmp_path / "site"
    root.mkdir()
    items = tuple(StreamItem(r.position, r.key, r.name, path=root / r.name) for r in rows)
    c, view, worker, _ = make(tmp_path)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    c.open_folder(str(root))
    review_dir = tmp_path / "profiles" / "default" / "review"
    c.sessions.on_worker_source_ready(
        SourceOpened(FolderSource(root, "name", items), 0, (), review_dir=review_dir)
    )
    overlay = Overlay.from_step((2, 2), np.full((2, 2), 0.5), np.array([0]), np.array([3]))
    probs = np.array([0.5, 0.5], np.float32)
    pending = [dataclasses.replace(r, prompted_status=MAP_PENDING) for r in rows]
    c.start()
    c.on_worker_results_ready(tuple(ItemResult(r, overlay, None, probs) for r in pending))
    c.on_worker_run_ended(ended("finished", 60, tmp_path))
    assert c.phase is Phase.DONE and not worker.of("want_prompted")

    desk = c.model.desk
    assert desk.review is not None
    answer_queue(desk.review, labels)  # the rules before I-DiPT's, answered
    starts = len(worker.of("start"))
    c.on_window_queue_requested()
    assert worker.of("want_prompted"), "the review reached them: asked for"
    assert len(worker.of("start")) == starts + 1 and c.phase is Phase.RUNNING, "a run of their own"
    assert any("made now for the 60 images" in text for text in view.logged("info"))
    assert "being made" in desk.why_empty()

    made = [dataclasses.replace(r, prompted_prediction=1 - r.source_prediction) for r in rows]
    empty = Overlay.from_step((1, 1), None, None, None)
    assert c.maps.text() == "the adapted network's decisions: 0 of 60", "the status bar counts them"
    c.on_worker_results_ready(tuple(ItemResult(r, empty, None, probs, True, True) for r in made[:30]))
    assert c.model.raw_rows[10].prompted_prediction == made[10].prompted_prediction
    assert c.model.overlays[10] is overlay, "the map stays"
    assert c.model.pending == 0 and c.maps.pending == 0, "no part of the run's decisions or maps"
    assert c.maps.text() == "the adapted network's decisions: 30 of 60"
    assert not any(comp.candidate == PROMPTED for comp in desk.review.comparisons()), "half are made"
    c.stop()  # the reviewer stops that run; the queue asked for again starts another
    c.on_worker_run_ended(ended("stopped", 0, tmp_path))
    assert c.phase is Phase.DONE
    c.on_window_queue_requested()
    assert len(worker.of("start")) == starts + 2 and c.phase is Phase.RUNNING
    c.on_worker_results_ready(tuple(ItemResult(r, empty, None, probs, True, True) for r in made[30:]))
    assert c.maps.text() == ""
    active = [comp for p in desk.review.parts if (comp := p.ladder.active) is not None]
    assert [comp.candidate for comp in active] == [PROMPTED], "the queue went on by itself"
    c.on_worker_run_ended(ended("finished", 0, tmp_path))
    c.on_window_queue_requested()
    said = [t for t in view.logged("info") if "The review reached the adapted network's decisions" in t]
    assert len(said) == 1, "said once a source"
    # the folder opened again from a state that never got them (the worker forgets what was asked
    # with every source opened): asked for again, and a run of their own started
    asked, starts = len(worker.of("want_prompted")), len(worker.of("start"))
    reopened = SourceOpened(FolderSource(root, "name", items), 60, tuple(pending), review_dir=review_dir)
    c.sessions.on_worker_source_ready(reopened)
    c.on_window_queue_requested()
    assert len(worker.of("want_prompted")) > asked and len(worker.of("start")) == starts + 1
    assert c.phase is Phase.RUNNING


def test_the_real_worker_makes_them_in_a_run_of_their_own(studio: Studio, tmp_path: Path) -> None:
    """The app's own worker on the tiny model (no source reference: I-DiPT's candidate is the only
    rule to test): the run leaves the prompted decisions pending; opening the queue has them made."""
    folder = make_folder(tmp_path, 12, labelled="csv")
    c = studio.open()
    studio.open_folder(c, folder)
    ended = studio.run_to_end(c)
    assert ended.prompted == 0  # type: ignore[attr-defined]
    model = c.controller.model
    assert all(r.prompted_status == MAP_PENDING and r.prompted_prediction is None for r in model.raw_rows)
    # before the queue is opened, the words say what comes, not that I-DiPT calls them as decided
    assert model.desk.why_empty().endswith("whose decisions are made once the review reaches it")
    sentence = outlook(model.desk.review).sentence(CLASSES, where=IN_THE_APP)
    assert "its decisions for these images are made when a review reaches it" in sentence, sentence
    assert "calls every image as it is decided now" not in sentence
    with studio.qtbot.waitSignal(c.runFinished, timeout=RUN_TIMEOUT_MS) as blocker:  # type: ignore[attr-defined]
        c.controller.on_window_queue_requested()
    assert blocker.args[0].prompted == 12 and blocker.args[0].processed == 0
    assert all(r.prompted_status == "" and r.prompted_prediction is not None for r in model.raw_rows)
    review = model.desk.review  # the queue went on: I-DiPT's candidate was tried on them
    assert review is not None and not any(p.ladder.waits_for_prompted for p in review.parts)
    empty = review.empty_queue()
    assert empty is None or empty.stage is QueueEmpty.SETTLED, empty
