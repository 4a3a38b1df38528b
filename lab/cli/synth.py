"""``f2tta synth``: write a generated multi-site dataset (histo, fundus, lesion or oct)."""

from __future__ import annotations

import argparse
import sys

from engine.errors import F2TTAError
from engine.util.text import shown
from lab.synth.generate import (
    DEFAULT_PER_DOMAIN,
    DEFAULT_SITES,
    DEFAULT_SIZE,
    KINDS,
    SITE_SETS,
    default_workers,
    parse_prevalence,
    write_synth,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, help="what to generate")
    parser.add_argument("--out", required=True, help="dataset folder to write (domain-folder layout)")
    parser.add_argument(
        "--per-domain", type=int, default=DEFAULT_PER_DOMAIN, help="images per site (default %(default)s)"
    )
    parser.add_argument(
        "--size", type=int, default=DEFAULT_SIZE, help="image side in pixels (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="rendering processes (default: the available cores, at most 8)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the site folders an earlier run wrote (only the files it wrote; a folder it did not write is refused)",
    )
    parser.add_argument(
        "--prevalence",
        default=None,
        metavar="SITE=P[,SITE=P...]",
        help="label shift: share P of the positive class at the named sites (others balanced)",
    )
    parser.add_argument(
        "--sites",
        choices=SITE_SETS,
        default=DEFAULT_SITES,
        help="site set: v1 (default) the first sites of every kind; v2, v3, v4 and v5 (every kind) and v6 "
        "(histo, fundus, lesion) keep site1 and add four new target sites. histo/lesion v3: frozen sections, "
        "Masson's trichrome, a line-scan scanner with seams, an over-exposed 40x objective; histo/lesion v4: "
        "a Giemsa-like stain, epi-fluorescence, bleached archival slides with air bubbles, a phone at the "
        "eyepiece; fundus v3: red-free, faded film slides, near infrared, interlaced video; fundus v4: "
        "rolling-shutter flicker bands, motion blur with a ghost, a squeezed frame with barrel distortion, "
        "local contrast normalisation; oct v2: time-domain false colour, mirror artefact, floaters and "
        "blinks, a saccade on a black-on-white display; oct v3: linear intensity, dispersion side lobes, "
        "an RPE-flattened display, specular saturation lines; histo/lesion v5: toluidine blue on resin "
        "sections, phase contrast of unstained sections, colour normalised to a template, formalin pigment "
        "in a 48-colour palette; fundus v5: a red channel saturated by the flash, a scanned halftone print, "
        "a two-capture montage with a seam, a high-gain sensor with column offsets and hot pixels; oct v4: "
        "a review-screen export with segmentation lines, one frame with median noise reduction, bowl-shaped "
        "myopic eyes, dim photoreceptor bands from an off-axis beam; histo/lesion v6: immunohistochemistry "
        "(DAB), retraction clefts from delayed fixation, wavelet compression, a half-resolution pyramid level; "
        "fundus v6: burnt-in annotations, automatic levels on a dim image, a photographed monitor's moire, a "
        "30-degree camera; oct v5: attenuation compensation, sweep-to-sweep power stripes, an equalised "
        "histogram, an axial point-spread widening with depth",
    )


def main(args: argparse.Namespace) -> int:
    workers = args.workers or default_workers()
    last = [-1]

    def progress(done: int, total: int) -> None:
        pct = 100 * done // total
        if pct // 10 != last[0] // 10 or done == total:
            last[0] = pct
            print(f"\r{done}/{total} images ({pct}%)", end="\n" if done == total else "", flush=True)

    try:
        prevalence = parse_prevalence(args.prevalence) if args.prevalence else None
        result = write_synth(
            args.kind,
            args.out,
            per_domain=args.per_domain,
            size=args.size,
            seed=args.seed,
            workers=workers,
            overwrite=args.force,
            progress=progress,
            prevalence=prevalence,
            sites=args.sites,
        )
    except F2TTAError as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 1
    total = sum(sum(c.values()) for c in result.counts.values())
    for site, counts in result.counts.items():
        print(f"  {site}: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    rate = total / result.seconds * 60 if result.seconds > 0 else float("inf")
    what = args.kind if args.sites == DEFAULT_SITES else f"{args.kind} ({args.sites} sites)"
    print(f"wrote {total} {what} images to {result.out} in {result.seconds:.1f} s ({rate:.0f} images/min)")
    return 0
