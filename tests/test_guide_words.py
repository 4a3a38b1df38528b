"""The words a new user reads first describe the current design (issue 38, finding 7): review
first -- the original model decides every image until the reviewer's answers show a site rule is
better, the queue asks about images chosen at random among those a rule would change, a handful of
answers is enough, nothing changes without them. The Quick guide and the welcome page said "the
most useful first", "a group is verified, or reverted" and "the model adapts to the site as the
images arrive"; docs/app.md said the demo sets hold 48 images (they hold 160)."""

from __future__ import annotations

import statistics
from pathlib import Path

from app.core.names import ANSWERS_WHEN_CLEARLY_BETTER
from engine.run.review import SiteReview
from tests.review_rows import site_rows

REPO = Path(__file__).resolve().parents[1]
OLD_DESIGN = ("most useful first", "verified, or reverted", "adapts to the site as", "as the images arrive")


def test_the_guide_and_the_welcome_page_say_review_first(qtbot: object) -> None:
    from app.views.help_dialogs import GUIDE
    from app.views.welcome import WelcomePanel

    welcome = WelcomePanel()
    qtbot.addWidget(welcome)  # type: ignore[attr-defined]
    for where, text in {"guide": GUIDE, "welcome": welcome.text.text()}.items():
        plain = " ".join(text.replace("<b>", "").replace("</b>", "").split())
        assert not [old for old in OLD_DESIGN if old in plain], where
        assert "The original model decides every image" in plain, where
        assert "chosen at random" in plain and f"about {ANSWERS_WHEN_CLEARLY_BETTER} when" in plain, where
        assert "without answers" in plain.lower(), where


def test_the_answers_a_clearly_better_rule_takes_are_what_the_guide_says() -> None:
    """Every answer on the candidate's side (a site whose classes divide where the fit candidate
    puts them): the answers the engine's ladder takes before the candidate decides the site."""
    taken = []
    for seed in range(5):
        rows, labels = site_rows(600, seed=seed)
        review = SiteReview(None, f"/site{seed}", 2)
        review.open(rows)
        answers = 0
        while review.ladder.current == "operating point" and (index := review.next_item()) is not None:
            review.set_mark(rows[index].key, int(labels[index]), "ana")
            answers += 1
        assert review.ladder.current == "fit", "the clearly better candidate decides the site"
        taken.append(answers)
    assert abs(statistics.median(taken) - ANSWERS_WHEN_CLEARLY_BETTER) <= 1, taken


def test_docs_app_says_how_many_images_the_demo_sets_hold() -> None:
    text = " ".join((REPO / "docs" / "app.md").read_text(encoding="utf-8").split())
    for kind, words in (("histology", "histology patches"), ("fundus", "fundus photographs")):
        images = sum(1 for p in (REPO / "resources" / "demo-sets" / kind).iterdir() if p.suffix == ".jpg")
        assert f"{images} generated {words}" in text, (kind, images)


def test_the_command_lines_help_and_the_package_say_review_first() -> None:
    """app/main.py's --help and the app package's docstring said "while the model adapts to it"."""
    import app
    from app.main import build_parser

    for where, text in {"--help": build_parser().description or "", "app": app.__doc__ or ""}.items():
        plain = " ".join(text.split())
        assert not [old for old in OLD_DESIGN if old in plain] and "adapts to it" not in plain, where
        assert (
            "The original model decides each image" in plain
            or "the original model decides each image" in plain
        ), where
