"""What a saved state records of its model's card, and the check that the card still says it.

A state is bound to its model's weights by their fingerprint, but the weights alone do not say
what the outputs mean: the card beside the checkpoint names the classes in label order, the
positive class, and how pixels are fed (input size, normalisation, training resolution). A card
whose classes were reversed, with the weights unchanged, was accepted for a project and every
recorded answer and count was read as the other class (issue 42, item 5). The state now records
these fields (:func:`card_record`) and a state is refused when the card no longer gives them
(:func:`check_card_record`). A state saved before the record existed is accepted and records it
at its next save.
"""

from __future__ import annotations

from typing import Any

from engine.errors import StateError
from engine.model.card import ModelCard

#: The card's fields that decide what the model's outputs mean or what it sees, in the order named.
RECORDED = ("classes", "positive_class", "img_size", "mean", "std", "mpp")


def card_record(card: ModelCard) -> dict[str, Any]:
    """The fields of ``card`` a state records (JSON-able)."""
    data = card.to_json()
    return {name: data[name] for name in RECORDED}


def check_card_record(saved: object, card: ModelCard, origin: str) -> None:
    """Refuse a state whose recorded card fields differ from ``card``'s (None: a state from before
    the record, accepted).

    Raises:
        StateError: the fields that differ, with the values then and now and what to do.
    """
    if saved is None:
        return
    if not isinstance(saved, dict):
        raise StateError(f"{origin}: the state's record of its model card is not an object")
    now = card_record(card)
    differences = [
        f"{name} {_shown(saved.get(name))} then, {_shown(now[name])} now"
        for name in RECORDED
        if _same(saved.get(name)) != _same(now[name])
    ]
    if differences:
        raise StateError(
            f"{origin}: the model card beside the checkpoint is not the one this state was made with "
            f"({'; '.join(differences)}); the weights are the same, but what the model's outputs mean "
            "is not, so the state's answers and counts would be read as other classes. Put back the card "
            "the state was made with, or start a new project (a new state) for this card"
        )


def _same(value: object) -> object:
    """A value compared as JSON gives it (a tuple and a list of the same items are the same)."""
    if isinstance(value, list | tuple):
        return [_same(v) for v in value]
    return value


def _shown(value: object) -> str:
    text = repr(_same(value))
    return text if len(text) <= 200 else text[:200] + "…"
