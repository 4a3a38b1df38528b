"""The base class and registry of test-time adaptation methods.

The vocabulary follows Tent and the test-time-adaptation benchmark repositories:
``configure_model`` prepares what adapts, ``collect_params`` names the parameters that are
updated, ``forward_and_adapt`` takes one unlabelled batch, adapts and predicts, ``reset`` goes
back to the source model. Methods also expose their adaptation state as tensors + JSON so that
:mod:`engine.run.state` can save it without pickle.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import nn

from engine.config import build_config
from engine.methods.decision import DecisionRecord
from engine.model.prompted_vit import PromptedViT

if TYPE_CHECKING:
    from engine.model.source_reference import SourceReference


@dataclass
class MethodOutput:
    """What one adaptation step returns (tensors stay on the method's device).

    Attributes:
        logits: ``(B, classes)`` the adapted model's prediction after the update.
        source_logits: ``(B, classes)`` the frozen source model's prediction.
        uncertainty: ``(B, N)`` per-patch-token uncertainty, if the method computes one.
        uncertain_tokens: ``(B, k)`` patch indices of T_U, if any.
        reliable_tokens: ``(B, k)`` patch indices of T_R, if any.
        diagnostics: scalars (loss, norms, ...) for logs, traces and plots.
        update_skipped: the method left its state unchanged because its loss or gradient was not
            finite (I-DiPT's guard); reported to the user with the image.
        views_kept: how many masked views entered the loss (I-DiPT's evidence check), None for
            methods without views.
        decision: where the reported decision came from (I-DiPT+'s operating point), or None.

    A batched step (B > 1) may say per image what differs between its images (each ``(B,)``
    long, in the batch's order); where it does not, ``update_skipped``, ``views_kept`` and
    ``decision`` hold for every image of the batch:

    Attributes:
        image_diagnostics: scalars per image (their loss, ...), over the batch's ``diagnostics``.
        updates_skipped: per image, whether its update was skipped.
        views_kept_each: per image, the masked views that entered the loss.
        decisions: per image, where its decision came from.
    """

    logits: torch.Tensor
    source_logits: torch.Tensor
    uncertainty: torch.Tensor | None = None
    uncertain_tokens: torch.Tensor | None = None
    reliable_tokens: torch.Tensor | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    update_skipped: bool = False
    views_kept: int | None = None
    decision: DecisionRecord | None = None
    image_diagnostics: dict[str, list[float]] = field(default_factory=dict)
    updates_skipped: list[bool] | None = None
    views_kept_each: list[int] | None = None
    decisions: list[DecisionRecord | None] | None = None


class TTAMethod(ABC):
    """A test-time adaptation method acting on a frozen :class:`PromptedViT`.

    Args:
        model: the wrapped source model (shared, never modified in place by prompt methods).
        config: the method's frozen config dataclass, or None for its defaults.
        seed: seeds every random choice of the method.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[Any] | None] = None
    #: Largest batch the method accepts per step (None: any; 1: it adapts image by image). What a
    #: batch means for each method: ``docs/method.md``, "Batches".
    max_batch: ClassVar[int | None] = None
    #: Config overrides that switch one mechanism off (or an optional one on) each: the rows of
    #: ``f2tta bench --ablation``.
    ablations: ClassVar[tuple[tuple[tuple[str, Any], ...], ...]] = ()
    #: Whether bf16 autocast may run the step on CUDA by default (``engine.run.accel``): a forward
    #: pass whose outputs feed no state of the method.
    autocast_ok: ClassVar[bool] = False
    #: Whether the step may run the prompted ViT's forward compiled (``engine.run.accel``).
    compile_ok: ClassVar[bool] = False
    #: Whether the method reads the model's source reference (``engine.model.source_reference``).
    uses_reference: ClassVar[bool] = False
    #: Whether the session's collapse guard (``engine.run.guard``) watches the method's predictions.
    #: A method whose reported decisions are guarded by its own tests against the source model
    #: (I-DiPT+) turns it off: a site that truly is 95 % one class must not wipe its evidence.
    collapse_check: ClassVar[bool] = True
    #: What the method reads of the source domain besides the model (stated in benchmark tables).
    source_access: ClassVar[str] = "none"
    #: Whether source-domain images can be given explicitly (:meth:`fit_source_statistics`).
    takes_source_images: ClassVar[bool] = False
    #: What people call the method (the app's method list, status bar and reports): no bare
    #: acronyms. This and the next two are given to :func:`register_method`.
    label: ClassVar[str] = ""
    #: Row of the default ``f2tta bench`` table (None: only when asked for with ``--methods``).
    bench_order: ClassVar[int | None] = None
    #: One of the methods the paper compares (the first rows of the default table).
    in_paper: ClassVar[bool] = False
    #: Settings that reach every code path in a few small steps (the tests' configuration).
    test_settings: ClassVar[Mapping[str, Any]] = {}
    #: Whether the reported decision needs only the image's source pass and the earlier images'
    #: (SourceOnly, I-DiPT+): such a method has a *decision step* (:meth:`decide`) and, when
    #: :attr:`has_map_step`, a *map step* (:meth:`map_step`) that may run behind the decisions,
    #: over the same images in the same order (``docs/method.md``, "Decisions first, maps behind").
    decides_from_source_pass: ClassVar[bool] = False
    #: Whether :meth:`map_step` makes anything (the uncertainty map, the prompted decision).
    has_map_step: ClassVar[bool] = False

    def __init__(self, model: PromptedViT, config: Any = None, seed: int = 0) -> None:
        if config is None and self.config_class is not None:
            config = self.config_class()
        if self.config_class is not None and not isinstance(config, self.config_class):
            raise TypeError(
                f"{self.name} expects a {self.config_class.__name__}, got {type(config).__name__}"
            )
        self.model = model
        self.config = config
        self.seed = seed
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(seed)
        self.steps = 0
        self.reference: SourceReference | None = None
        # The sites of the images being stepped (the folders or slides they were loaded from), set
        # by the session before each step; None when nobody says (the paper's free-form protocol).
        # Methods that keep per-site state read them (``site`` is the first image's); the others
        # ignore them.
        self.sites: list[str | None] = []
        self.site: str | None = None
        self.configure_model()

    # -- the Tent vocabulary -------------------------------------------------------------------
    def configure_model(self) -> None:  # noqa: B027 - optional hook
        """Create or prepare whatever adapts; called at construction and by :meth:`reset`."""

    def use_reference(self, reference: SourceReference | None) -> None:
        """Receive the model's source reference (None: the model has none); kept across resets.

        Called by the session right after construction for methods with :attr:`uses_reference`.
        """
        self.reference = reference

    def fit_source_statistics(self, x: torch.Tensor) -> None:
        """Use source-domain images ``(B, 3, H, W)`` (model input) as the method's source reference.

        Only for methods with :attr:`takes_source_images`; the others refuse.
        """
        raise TypeError(f"method {self.name!r} takes no source images")

    def collect_params(self) -> list[nn.Parameter]:
        """Parameters updated by adaptation (empty for SourceOnly)."""
        return []

    @abstractmethod
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        """Adapt on the batch ``x`` ``(B, 3, H, W)`` and return predictions."""

    def decide(self, x: torch.Tensor) -> MethodOutput:
        """The decision step of :meth:`forward_and_adapt` on the batch ``x``: the same logits and
        decision records, without what the map step makes (no uncertainty, ``prompted`` -1).

        Only methods with :attr:`decides_from_source_pass`; it advances only the state the
        decisions read. It is :meth:`decision_pass` followed by :meth:`decide_from_pass`.
        """
        return self.decide_from_pass(self.decision_pass(x))

    def decision_pass(self, x: torch.Tensor) -> Any:
        """The part of :meth:`decide` that reads no state of the method: the frozen model's pass of
        ``x``, its outputs brought to the host. It may run on another thread, ahead of the batches
        before it (``engine.run.ahead``). Only methods with :attr:`decides_from_source_pass`."""
        raise TypeError(f"method {self.name!r} does not decide from the source pass alone")

    def decide_from_pass(self, passed: Any) -> MethodOutput:
        """:meth:`decide`'s decisions from what :meth:`decision_pass` returned, in arrival order
        (it advances the state the decisions read)."""
        raise TypeError(f"method {self.name!r} does not decide from the source pass alone")

    def map_step(self, x: torch.Tensor) -> MethodOutput:
        """The map step on a batch :meth:`decide` already decided, taken in arrival order: the
        uncertainty map and its tokens (the adapted model's own prediction is the prompt step's,
        :meth:`prompt_step`); it advances only the state the maps read.

        Only methods with :attr:`has_map_step`.
        """
        raise TypeError(f"method {self.name!r} has no map step")

    def has_prompt_step(self) -> bool:
        """Whether the adapted model's own prediction (I-DiPT's prompted decision) comes from a step
        of its own, :meth:`prompt_step`, taken in arrival order after the map step, and only when it
        is asked for (``docs/method.md``, "The prompted decision on demand")."""
        return False

    def prompt_step(self, x: torch.Tensor) -> MethodOutput:
        """The adapted model's own prediction (in ``logits``) on a batch the map step already
        mapped, taken in arrival order; it advances only the state that prediction reads.

        Only methods whose :meth:`has_prompt_step` is True.
        """
        raise TypeError(f"method {self.name!r} has no prompt step")

    def finish(self, logits: torch.Tensor, source_logits: torch.Tensor, **diagnostics: float) -> MethodOutput:
        """The end of a step: count it and return its prediction with the step's scalars."""
        self.steps += 1
        return MethodOutput(logits=logits, source_logits=source_logits, diagnostics=diagnostics)

    def reset(self) -> None:
        """Restore the source model and the method's initial state exactly."""
        self.generator.manual_seed(self.seed)
        self.steps = 0
        self.configure_model()

    def recover(self) -> str:
        """Undo image-specific adaptation after a detected collapse; returns what was done.

        The default resets everything to the source model; methods with finer-grained state
        (I-DiPT's prompt bank) override it.
        """
        self.reset()
        return "adaptation reset to the source model"

    # -- state ------------------------------------------------------------------------------------
    def saved_optimizer(self) -> torch.optim.Optimizer | None:
        """The optimiser kept from image to image, saved with the state (None: the method keeps none)."""
        return None

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """All tensors of the adaptation state (CPU copies are made by the caller)."""
        tensors = {"rng.cpu": self.generator.get_state()}
        optimizer = self.saved_optimizer()
        if optimizer is not None:
            tensors.update(optimizer_state(_OPTIM, optimizer)[0])
        return tensors

    def state_meta(self) -> dict[str, Any]:
        """JSON-able part of the state (counters, optimiser hyper-parameters, ...)."""
        meta: dict[str, Any] = {"steps": self.steps}
        optimizer = self.saved_optimizer()
        if optimizer is not None:
            meta["optimizer"] = optimizer_state(_OPTIM, optimizer)[1]
        return meta

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state_tensors` / :meth:`state_meta`; raises ValueError/KeyError."""
        self.generator.set_state(tensors["rng.cpu"].to(torch.uint8).cpu())
        self.steps = int(meta["steps"])
        optimizer = self.saved_optimizer()
        if optimizer is not None:
            # Adam moves its moments to the parameters' device itself and keeps 'step' on the CPU.
            load_optimizer_state(_OPTIM, optimizer, tensors, meta["optimizer"])

    def config_dict(self) -> dict[str, Any]:
        if dataclasses.is_dataclass(self.config) and not isinstance(self.config, type):
            return dataclasses.asdict(self.config)
        return {}


#: Name prefix of a saved optimiser's tensors (``optim.<param index>.<key>``).
_OPTIM = "optim"

#: The method ``f2tta run``, the demo and the app use unless told otherwise: the project's I-DiPT+
#: (the paper's I-DiPT stays selectable as ``idipt``; measured figures in ``docs/benchmark.md``).
DEFAULT_METHOD = "idipt+"

_REGISTRY: dict[str, type[TTAMethod]] = {}
M = TypeVar("M", bound=type[TTAMethod])


def register_method(
    name: str, label: str = "", *, bench_order: int | None = None, in_paper: bool = False
) -> Callable[[M], M]:
    """Class decorator adding a method to the registry under ``name``.

    Args:
        name: the name the CLI, the app's settings and states use.
        label: what people call it (:attr:`TTAMethod.label`; ``name`` when empty).
        bench_order: its row in the default ``f2tta bench`` table (None: left out).
        in_paper: one of the methods the paper compares.
    """

    def decorator(cls: M) -> M:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"method name {name!r} is already registered by {_REGISTRY[name].__name__}")
        cls.name = name
        cls.label = label or name
        cls.bench_order = bench_order
        cls.in_paper = in_paper
        _REGISTRY[name] = cls
        return cls

    return decorator


def get_method_class(name: str) -> type[TTAMethod]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None


def list_methods() -> list[str]:
    return sorted(_REGISTRY)


def method_config_class(name: str) -> type[Any] | None:
    return get_method_class(name).config_class


def method_config(name: str, values: Mapping[str, Any]) -> Any:
    """Method ``name``'s config with ``values`` set, every value checked (None: the method has none).

    The one builder of method settings: ``--set``, the benchmark's rows and sweeps, the app's
    settings and a saved state all come through here (:func:`engine.config.build_config`).

    Raises:
        KeyError: no method of that name.
        ValueError: an unknown field, a bad value, or settings for a method that has none.
    """
    cls = method_config_class(name)
    if cls is None:
        if values:
            raise ValueError(f"method {name!r} has no settings to change ({', '.join(values)})")
        return None
    return build_config(cls, values)


def method_for_config(config: Any) -> str:
    """The registered method whose config class is exactly ``type(config)``."""
    names = [name for name, cls in sorted(_REGISTRY.items()) if cls.config_class is type(config)]
    if len(names) != 1:
        raise TypeError(f"no single registered method takes a {type(config).__name__}; name the method")
    return names[0]


def optimizer_state(
    prefix: str, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split an optimiser's state dict into named tensors and a JSON-able remainder."""
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}.{idx}.{key}"] = value
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def load_optimizer_state(
    prefix: str, optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]
) -> None:
    """Inverse of :func:`optimizer_state`."""
    state: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for name, value in tensors.items():
        if name.startswith(head):
            idx, key = name[len(head) :].split(".", 1)
            state.setdefault(int(idx), {})[key] = value
    for idx, values in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(values)
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def require_one_image(x: torch.Tensor, who: str) -> None:
    """Raise ValueError unless the batch ``x`` holds one image (methods that adapt image by image)."""
    if x.shape[0] != 1:
        raise ValueError(f"{who} adapts image by image: batch size must be 1")


def check_shapes(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Raise KeyError/ValueError unless ``tensors`` holds every expected name with its shape."""
    for name, current in expected.items():
        if name not in tensors:
            raise KeyError(f"missing tensor {name!r}")
        if tuple(tensors[name].shape) != tuple(current.shape):
            raise ValueError(
                f"tensor {name!r} has shape {tuple(tensors[name].shape)}, expected {tuple(current.shape)}"
            )


@torch.no_grad()
def copy_saved(tensors: dict[str, torch.Tensor], current: dict[str, torch.Tensor]) -> None:
    """Copy each saved tensor into the current tensor of its name, in place (its device and dtype)."""
    for name, value in current.items():
        value.copy_(tensors[name].to(value.device, value.dtype))
