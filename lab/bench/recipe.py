"""A suite recipe, read as untrusted input: every field typed and bounded before anything is made.

A recipe (JSON, e.g. ``benchmarks/suites/safe-adaptation-1.json``) is read with the bounded JSON
reader (size and nesting capped before parsing, :mod:`engine.util.bounded_json`) and checked field
by field against one table, :data:`RECIPE_FIELDS` (and :data:`KIND_FIELDS` for each entry of
``kinds``): each row names the field, how its value is read and bounded, and its default when it
may be left out. Then :data:`RULES` check the fields against each other (the evaluation data from
another seed than the training data, the stream's images available at every class mix, the
data a recipe makes at most :data:`MAX_IMAGES`). A new field is one more row; a recipe written
before it still loads when the row has a default. A ``train_per_site`` of 10⁹, a NaN δ, an empty
list of kinds or a recipe nested 100 000 deep is refused with a message naming the field, before
any data is generated or any array allocated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import F2TTAError
from engine.util.bounded_json import (
    JsonFileError,
    SchemaError,
    read_json_file,
    require_float,
    require_int,
    require_list,
    require_object,
    require_str,
)
from lab.bench.replay import REPLAYABLE
from lab.bench.streams import DRIFT, HELP_THEN_HARM, SCAN, mix_share
from lab.synth.generate import KINDS, SITE_SETS, get_spec

MAX_RECIPE_BYTES = 1 << 20
MAX_RECIPE_DEPTH = 8  # a recipe is three levels deep
MAX_SEED = 2**32 - 1
#: Images a recipe may generate in all (training and evaluation, every kind and site): the
#: committed suite makes 45 000; this many at 96 px take some 15 GB.
MAX_IMAGES = 1_000_000

Reader = Callable[[object, str], Any]


class SuiteError(F2TTAError):
    """A recipe is malformed, or its data or models cannot be made."""


#: The default of a field that must be given.
REQUIRED: Any = ...


@dataclass(frozen=True)
class Field:
    """One row of a field table: the JSON key, how its value is read and checked, and its default
    (:data:`REQUIRED`: the key must be there)."""

    name: str
    read: Reader
    default: Any = REQUIRED


def integer(lo: int, hi: int) -> Reader:
    return lambda value, where: require_int(value, where, lo, hi)


def number(lo: float, hi: float, lo_open: bool = False) -> Reader:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``): NaN and infinities are refused."""
    return lambda value, where: require_float(value, where, lo, hi, lo_open=lo_open)


def boolean() -> Reader:
    def read(value: object, where: str) -> bool:
        if not isinstance(value, bool):
            raise SchemaError(f"{where}: expected true or false, not {str(value)[:40]!r}")
        return value

    return read


def text(max_len: int) -> Reader:
    return lambda value, where: require_str(value, where, max_len, empty=False)


def choice(options: Sequence[str], what: str) -> Reader:
    def read(value: object, where: str) -> str:
        name = require_str(value, where, 64)
        if name not in options:
            raise SchemaError(f"{where}: unknown {what} {name!r}; choose from {', '.join(options)}")
        return name

    return read


def list_of(item: Reader, lo: int, hi: int) -> Reader:
    """A list of ``lo`` to ``hi`` entries, each read by ``item``, none repeated."""

    def read(value: object, where: str) -> tuple[Any, ...]:
        entries = require_list(value, where, hi)
        if len(entries) < lo:
            raise SchemaError(f"{where} must hold at least {lo} entr{'y' if lo == 1 else 'ies'}")
        out = tuple(item(v, f"{where}[{i}]") for i, v in enumerate(entries))
        for i, v in enumerate(out):
            if v in out[:i]:
                raise SchemaError(f"{where}[{i}] repeats an earlier entry ({v!r})")
        return out

    return read


def mix(value: object, where: str) -> float | str:
    """A class mix: ``"drift"``, ``"scan"`` or a positive share strictly between 0 and 1."""
    if value in (DRIFT, SCAN, HELP_THEN_HARM):
        return str(value)
    bad = SchemaError(
        f"{where}: bad class mix {str(value)[:40]!r}: a share in (0, 1), {DRIFT!r}, {SCAN!r} or {HELP_THEN_HARM!r}"
    )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad
    try:
        share = float(value)
    except OverflowError:  # an integer of 400 digits
        raise bad from None
    if not 0.0 < share < 1.0:  # NaN too
        raise bad
    return share


def read_fields(raw: object, fields: Sequence[Field], where: str) -> dict[str, Any]:
    """The checked values of ``fields`` from the JSON object ``raw``; unknown keys are refused.

    Raises:
        SchemaError: naming the first missing, unknown or out-of-bounds field.
    """
    data = require_object(raw, where or "the recipe")
    known = {f.name for f in fields}
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise SchemaError(
            f"{where or 'the recipe'}: unknown field {unknown[0]!r}; the fields are {', '.join(sorted(known))}"
        )
    out = {}
    for f in fields:
        key = f"{where}.{f.name}" if where else f.name
        if f.name in data:
            out[f.name] = f.read(data[f.name], key)
        elif f.default is REQUIRED:
            raise SchemaError(f"the field {key!r} is missing")
        else:
            out[f.name] = f.default
    return out


@dataclass(frozen=True)
class KindSpec:
    kind: str
    train_seed: int  # generator seed of the training data
    eval_seed: int  # generator seed of the evaluation data (differs from train_seed)
    fragments: int  # F per site in the streams
    sites: str = "v1"  # the kind's site set (lab.synth.generate.SITE_SETS)

    @property
    def name(self) -> str:
        """The kind as the cells name it (``histo``; ``histo-v2`` for the second site set)."""
        return self.kind if self.sites == "v1" else f"{self.kind}-{self.sites}"


KIND_FIELDS: tuple[Field, ...] = (
    Field("kind", choice(KINDS, "kind")),
    Field("train_seed", integer(0, MAX_SEED)),
    Field("eval_seed", integer(0, MAX_SEED)),
    Field("fragments", integer(1, 10_000)),
    Field("sites", choice(SITE_SETS, "site set"), default="v1"),
)

#: How a stream's images are given to the method: ``free-form`` (the paper's protocol: the site is
#: unknown), ``known-sites`` (each site's images are one site, the app's folder or slide), and
#: ``mixed-folders`` (known sites, but the two sites numbered in ``mixed_pair``, 1-based in each
#: kind's site order, come as one folder).
PROTOCOLS = ("free-form", "known-sites", "mixed-folders")


def kind_spec(value: object, where: str) -> KindSpec:
    return KindSpec(**read_fields(value, KIND_FIELDS, where))


#: Every field of a recipe, in the order of :class:`Recipe`'s constructor.
RECIPE_FIELDS: tuple[Field, ...] = (
    Field("name", text(200)),
    Field("kinds", list_of(kind_spec, 1, 8)),
    Field("training_seeds", list_of(integer(0, MAX_SEED), 1, 16)),
    Field("train_per_site", integer(10, 50_000)),
    Field("eval_per_site", integer(10, 50_000)),
    Field("size", integer(16, 512)),
    Field("source", text(64)),
    Field("epochs", integer(1, 1000)),
    Field("patience", integer(1, 1000)),
    Field("mixes", list_of(mix, 1, 16)),
    Field("deltas", list_of(number(0.0, 1000.0, lo_open=True), 1, 16)),
    Field("images_per_site", integer(10, 50_000)),
    Field("stream_seed", integer(0, MAX_SEED)),
    Field("methods", list_of(choice(REPLAYABLE, "method (not replayable)"), 1, len(REPLAYABLE))),
    Field("about", text(10_000), default=""),
    Field("training_recipes", list_of(text(64), 1, 4), default=("default",)),
    Field("protocols", list_of(choice(PROTOCOLS, "protocol"), 1, len(PROTOCOLS)), default=("free-form",)),
    Field("mixed_pair", list_of(integer(2, 64), 2, 2), default=()),
    Field("review_budgets", list_of(integer(0, 1000), 1, 8), default=()),
    Field("reviewer_noise", list_of(number(0.0, 0.5), 1, 4), default=(0.0,)),
    Field("review_at", number(0.0, 1.0, lo_open=True), default=1.0),
    Field("review_moments", list_of(number(0.0, 1.0, lo_open=True), 1, 4), default=()),
    Field("plain_uses", boolean(), default=False),
)


@dataclass(frozen=True)
class Recipe:
    """What the suite runs (``lab.bench.suite``); every field is in the JSON file."""

    name: str
    kinds: tuple[KindSpec, ...]
    training_seeds: tuple[int, ...]
    train_per_site: int
    eval_per_site: int
    size: int
    source: str
    epochs: int
    patience: int
    mixes: tuple[float | str, ...]
    deltas: tuple[float, ...]
    images_per_site: int
    stream_seed: int
    methods: tuple[str, ...]
    about: str = ""
    training_recipes: tuple[str, ...] = ("default",)  # source-model training recipes (engine.training)
    protocols: tuple[str, ...] = ("free-form",)  # PROTOCOLS
    mixed_pair: tuple[int, ...] = ()  # two sites (1-based numbers) given as one folder (mixed-folders)
    review_budgets: tuple[int, ...] = ()  # simulated reviews per site (empty: none, or the CLI's)
    reviewer_noise: tuple[float, ...] = (0.0,)  # the share of the simulated reviewer's marks that are wrong
    review_at: float = 1.0  # the share of a site's images processed when the reviewer comes
    review_moments: tuple[float, ...] = ()  # also a reviewer coming at these shares (K answers, no noise)
    plain_uses: bool = False  # also the plain uses of the same K labels (lab.bench.plain_labels)

    @classmethod
    def load(cls, path: Path) -> Recipe:
        """Read and check a recipe file.

        Raises:
            SuiteError: the file is unreadable, too large or too deeply nested, or a field is
                missing, unknown or out of bounds; the message names the file and the field.
        """
        try:
            raw = read_json_file(
                path, what="suite recipe", max_bytes=MAX_RECIPE_BYTES, max_depth=MAX_RECIPE_DEPTH
            )
        except (FileNotFoundError, JsonFileError) as exc:  # missing, not a regular file, too large, not JSON
            raise SuiteError(str(exc)) from exc
        try:
            recipe = cls(**read_fields(raw, RECIPE_FIELDS, ""))
        except SchemaError as exc:
            raise SuiteError(f"{path}: not a usable suite recipe: {exc}") from exc
        try:
            recipe.check()
        except SuiteError as exc:
            raise SuiteError(f"{path}: {exc}") from exc
        return recipe

    def check(self) -> None:
        """The checks across fields (:data:`RULES`); the first that fails raises :class:`SuiteError`."""
        for rule in RULES:
            problem = rule(self)
            if problem:
                raise SuiteError(problem)


def _kinds(r: Recipe) -> str | None:
    for i, k in enumerate(r.kinds):
        if k.kind not in KINDS:
            return f"unknown kind {k.kind!r}; choose from {', '.join(KINDS)}"
        if k.train_seed == k.eval_seed:
            return f"{k.kind}: the evaluation data must come from another seed than the training data"
        if any(earlier.name == k.name for earlier in r.kinds[:i]):
            return f"kinds[{i}]: {k.name} is named twice (the cells of the two could not be told apart)"
        try:
            get_spec(k.kind, k.sites)
        except F2TTAError as exc:
            return f"kinds[{i}]: {exc}"
    return None


def _protocols(r: Recipe) -> str | None:
    from engine.training import RECIPES

    unknown = [name for name in r.training_recipes if name not in RECIPES]
    if unknown:
        return f"unknown training recipe {unknown[0]!r}; choose from {', '.join(RECIPES)}"
    if ("mixed-folders" in r.protocols) != bool(r.mixed_pair):
        return "the mixed-folders protocol needs mixed_pair (two sites given as one folder), and only it"
    for k in r.kinds:
        names = [s.name for s in get_spec(k.kind, k.sites).sites]
        for number in r.mixed_pair:
            if number > len(names) or names[number - 1] == r.source:
                return (
                    f"mixed_pair: site number {number} is not a target site of {k.name} ({', '.join(names)})"
                )
    return None


def _methods(r: Recipe) -> str | None:
    if any(m not in REPLAYABLE for m in r.methods) or "source" not in r.methods:
        return f"methods must include 'source' and be replayable ({', '.join(REPLAYABLE)})"
    return None


def _mixes(r: Recipe) -> str | None:
    for m in r.mixes:
        if m not in (DRIFT, SCAN, HELP_THEN_HARM) and not (isinstance(m, float) and 0.0 < m < 1.0):
            return f"bad class mix {m!r}: a share in (0, 1), {DRIFT!r}, {SCAN!r} or {HELP_THEN_HARM!r}"
    if not r.training_seeds or not r.deltas or not r.mixes or not r.kinds or r.images_per_site < 10:
        return "a recipe needs kinds, training seeds, deltas, mixes and at least 10 images per site"
    if any(not (math.isfinite(d) and d > 0) for d in r.deltas):
        return "every δ must be a positive number"
    return None


def _sites(r: Recipe) -> str | None:
    for k in r.kinds:
        spec = get_spec(k.kind, k.sites)
        names = [s.name for s in spec.sites]
        if r.source not in names:
            return f"source {r.source!r} is not a site of {k.kind} ({', '.join(names)})"
        if k.fragments > r.images_per_site:
            return f"{k.kind}: {k.fragments} fragments per site for {r.images_per_site} images per site"
        for role, per_site in (("train", r.train_per_site), ("eval", r.eval_per_site)):
            if per_site < len(spec.classes):
                return f"{role}_per_site = {per_site}: {k.kind} needs at least {len(spec.classes)}"
    return None


def _stream_fits(r: Recipe) -> str | None:
    """Each site's stream can be drawn from its evaluation images at every class mix (the generated
    classes are balanced: the positive class has ``eval_per_site // classes`` images at least)."""
    for k in r.kinds:
        classes = len(get_spec(k.kind, k.sites).classes)
        positives = r.eval_per_site // classes
        negatives = r.eval_per_site - math.ceil(r.eval_per_site / classes)
        for m in r.mixes:
            wanted = round(mix_share(m) * r.images_per_site)
            if wanted > positives or r.images_per_site - wanted > negatives:
                return (
                    f"{k.kind}: {r.images_per_site} images per site at class mix {m} need {wanted} positive "
                    f"and {r.images_per_site - wanted} other images; eval_per_site = {r.eval_per_site} gives "
                    f"{positives} and {negatives}: raise eval_per_site or lower images_per_site"
                )
    return None


def _total(r: Recipe) -> str | None:
    images = sum(len(get_spec(k.kind, k.sites).sites) * (r.train_per_site + r.eval_per_site) for k in r.kinds)
    if images > MAX_IMAGES:
        return f"the recipe would generate {images} images, more than the limit of {MAX_IMAGES}"
    return None


#: The checks across fields, in order (each returns what is wrong, or None).
RULES: tuple[Callable[[Recipe], str | None], ...] = (
    _kinds,
    _protocols,
    _methods,
    _mixes,
    _sites,
    _stream_fits,
    _total,
)
