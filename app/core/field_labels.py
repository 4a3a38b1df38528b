"""Plain-language names of the methods' hyper-parameters, for Settings ▸ Advanced (Qt-free).

The engine names its fields for code (``prompt_len_specific``, ``mc_passes``, ``beta``); a reader
of the dialog gets these names, with the code name and the field's help in the tooltip (the name
``--set`` and ``f2tta methods`` use). One name may mean different things in two methods
(``gamma`` in I-DiPT and in FOA-shift), so a method may name its own. A field without an entry
gets its code name in words (``hog_cell`` → "Hog cell").
"""

from __future__ import annotations

LABELS: dict[str, str] = {
    # shared by several methods
    "lr": "Learning rate",
    "mc_passes": "Uncertainty passes (Monte-Carlo dropout)",
    "mc_dropout": "Dropout during the uncertainty passes",
    "params": "Parameters that adapt",
    "momentum": "Optimiser momentum",
    "weight_decay": "Weight decay",
    "temperature": "Softmax temperature",
    "iters": "Optimisation steps per image",
    "predict_after_update": "Predict again after each update",
    # I-DiPT
    "prompt_len_specific": "Image-specific prompt length (tokens per layer)",
    "prompt_len_invariant": "Shared prompt length (tokens per layer)",
    "bank_size": "Prompt bank size (images kept)",
    "beta": "Low-frequency window (share of the image side)",
    "gamma": "Shared prompt's memory (moving-average decay)",
    "graph_dim": "Graph node width",
    "bank_temperature": "Prompt bank weighting temperature",
    "prompt_mode": "How prompts enter the model",
    "prompt_init_std": "Prompt starting spread",
    "use_uom": "Mask the uncertain patches",
    "use_pgd": "Use the prompt bank and graph distillation",
    "use_graphs": "Use the graphs",
    "consistency_target": "Consistency target",
    "evidence_check": "Drop masked views that change class",
    # I-DiPT+
    "operating_point": "Per-site operating points",
    "source_gate": "Keep the source decision for source-like images",
    "join": "Largest distance to join a site group",
    "group_capacity": "Images a site group keeps",
    "max_groups": "Site groups kept at most",
    "min_images": "Images before a site group is fitted",
    "refit": "Refit after the group grew by",
    "feature_dims": "Feature directions of the mixture",
    "min_share": "Smallest share of a mixture component",
    "min_separation": "Smallest separation of the components",
    "max_disagreement": "Largest disagreement with the mixture",
    "min_edge": "Smallest distance of the threshold from the bulk",
    "bootstrap": "Bootstrap refits per operating point",
    "quantile": "Bootstrap interval quantile",
    "em_iterations": "Mixture fitting iterations at most",
    # C-MAE
    "beta1": "Adam first-moment decay",
    "beta2": "Adam second-moment decay",
    "mask_percent": "Patches masked (percent, most uncertain first)",
    "hog_weight": "Weight of the texture (HOG) reconstruction",
    "hog_bins": "Texture (HOG) orientation bins",
    "hog_cell": "Texture (HOG) cell size (pixels)",
    "restore_prob": "Chance to restore a weight to the source",
    # CoTTA
    "ema_momentum": "Teacher's memory (moving-average momentum)",
    "confidence_threshold": "Confidence below which views are averaged",
    "aug_views": "Augmented views per image",
    # DLTTA
    "memory_size": "Memory size (images)",
    "neighbours": "Nearest neighbours averaged",
    # DPCore
    "num_prompts": "Prompt tokens",
    "ema_alpha": "Coreset update step",
    "ratio_threshold": "In-distribution loss ratio",
    "id_steps": "Steps for an in-distribution batch",
    "ood_steps": "Steps for an out-of-distribution batch",
    "std_weight": "Weight of the spread term",
    "max_coreset": "Coreset size at most (0: unbounded)",
    "source_images": "Images that estimate the source statistics",
    # SAR
    "rho": "Sharpness neighbourhood radius",
    "margin_factor": "Entropy filter margin",
    "reset_entropy": "Reset below this entropy (nats)",
    "scale_reset_entropy": "Scale the reset entropy to the classes",
    "ema_decay": "Entropy average's memory (decay)",
    "top_fraction": "Share of the top blocks kept frozen",
    # T3A
    "filter_k": "Supports kept per class",
    # VPTTA
    "prompt_alpha": "Prompt window (share of the image side)",
}
# Where one code name means something else in a method: (method, field) -> label.
METHOD_LABELS: dict[tuple[str, str], str] = {
    ("foa-shift", "alpha"): "Weight of the newest image in the running mean",
    ("foa-shift", "gamma"): "Step toward the source mean",
}


def field_label(name: str, method: str = "") -> str:
    """The plain-language name of ``method``'s field ``name`` (its code name in words without one)."""
    label = METHOD_LABELS.get((method, name)) or LABELS.get(name)
    if label:
        return label
    words = name.replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def field_tooltip(name: str, help_text: str, default: object) -> str:
    """The tooltip of a field's editor: its help, its default and its code name (for ``--set``)."""
    lines = [help_text[:1].upper() + help_text[1:]] if help_text else []
    lines.append(f"Default: {default}")
    lines.append(f"Code name: {name} (f2tta run --set {name}=…)")
    return "\n".join(lines)
