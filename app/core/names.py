"""Names shown to users (Qt-free): methods, token sets and models, without bare acronyms."""

from __future__ import annotations

from app._engine import ANSWERS_WHEN_CLEARLY_BETTER as ANSWERS_WHEN_CLEARLY_BETTER  # the guide's "about 5"
from app._engine import DEFAULT_METHOD, ModelCard, get_method_class

# The two token sets uncertainty-oriented masking selects, in words (the paper's T_U and T_R).
UNCERTAIN_TOKENS = "Uncertain patches (masked)"
RELIABLE_TOKENS = "Reliable patches"


def readable_help(text: str) -> str:
    """A field's help text with the paper's token-set symbols spelled out."""
    return text.replace("T_U", "the uncertain patches").replace("T_R", "the reliable patches")


def method_label(name: str) -> str:
    """The readable name of a registered method (its ``label``; the default method is marked as such)."""
    label = get_method_class(name).label or name
    return f"{label} · default" if name == DEFAULT_METHOD else label


def describe_model(card: ModelCard) -> str:
    """``ViT, 4 blocks, 12-px patches, 96 px input`` from the card (not timm's template name).

    timm's name (``vit_tiny_patch16_224``) is the template the model was built from; the card's
    keyword arguments may change its depth, patch size and input size, so the name alone misleads.
    """
    kwargs = card.model_kwargs
    family = "ViT" if card.arch.startswith(("vit", "deit")) else card.arch
    width = {"tiny": "Tiny", "small": "Small", "base": "Base", "large": "Large", "huge": "Huge"}
    for key, text in width.items():
        if f"_{key}_" in card.arch:
            family += f"-{text}"
            break
    parts = [family]
    depth = kwargs.get("depth")
    if isinstance(depth, int):
        parts.append(f"{depth} blocks")
    patch = kwargs.get("patch_size")
    if not isinstance(patch, int):
        digits = "".join(ch for ch in card.arch.split("patch")[-1].split("_")[0] if ch.isdigit())
        patch = int(digits) if "patch" in card.arch and digits else None
    if patch:
        parts.append(f"{patch}-px patches")
    parts.append(f"{card.img_size} px input")
    return ", ".join(parts)
