"""Site and class purity of I-DiPT+'s appearance neighbourhoods, with and without the class removed.

For every image of a split (all sites together, as one stream would hold them), the neighbourhood
is formed as I-DiPT+ forms it: the ``--neighbours`` nearest other images in the appearance space of
the model's source reference, weighted by a Gaussian kernel of width ``--bandwidth`` × the source
images' median pairwise distance. The script prints, per site, the kernel-weighted share of each
neighbourhood that comes from the same site (site purity: high is wanted) and from the same class
(class purity: near the site's class balance is wanted; near 100 % means the neighbourhood holds
one class and cannot show where the site's threshold lies), and the share of images within the
source radius (the source gate). The same figures for the appearance statistics *before* the
class directions are removed show what the removal buys.

    python scripts/neighbourhood_purity.py --data DATA --model MODEL.safetensors [--subset val]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Session
from engine.data import open_dataset, split_dataset
from engine.model.source_reference import appearance_statistics


def purities(
    coords: torch.Tensor, sites: np.ndarray, labels: np.ndarray, k: int, width: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per image: kernel-weighted site purity, class purity and summed weight of its neighbourhood."""
    d2 = torch.cdist(coords, coords).pow(2)
    d2.fill_diagonal_(float("inf"))
    dist, idx = torch.topk(d2, min(k, len(coords) - 1), largest=False)
    w = torch.exp(-0.5 * dist / width**2).numpy()
    idx_np = idx.numpy()
    same_site = (sites[idx_np] == sites[:, None]).astype(float)
    same_class = (labels[idx_np] == labels[:, None]).astype(float)
    total = w.sum(axis=1)
    safe = np.maximum(total, 1e-12)
    return (w * same_site).sum(axis=1) / safe, (w * same_class).sum(axis=1) / safe, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--subset", choices=("val", "test"), default="val")
    parser.add_argument("--neighbours", type=int, default=100)
    parser.add_argument("--bandwidth", type=float, default=1.0)
    args = parser.parse_args()

    session = Session(args.model, method="idipt+", device="cpu")
    ref = session.reference
    if ref is None:
        print(f"error: {args.model} has no source reference (run `f2tta reference`)", file=sys.stderr)
        return 1
    ds = open_dataset(args.data)
    model = session.model
    split_seed = (
        int(session.card.training.get("split_seed", 0)) if isinstance(session.card.training, dict) else 0
    )
    splits = split_dataset(ds, split_seed)
    removed, raw, sites, labels = [], [], [], []
    with torch.no_grad():
        for domain, split in splits.items():
            items = split.val if args.subset == "val" else split.test
            for item in items:
                source = model.source_pass(session.preprocess(item.path))
                removed.append(ref.appearance(source.block1_out, model.num_prefix_tokens)[0])
                stats = appearance_statistics(source.block1_out, model.num_prefix_tokens)[0]
                raw.append((stats - ref.appearance_mean) / ref.appearance_scale)
                sites.append(domain)
                labels.append(item.label)
    site_arr, label_arr = np.array(sites), np.array(labels)
    coords = torch.stack(removed).double()
    raw_coords = torch.stack(raw).double()
    width = args.bandwidth * ref.bandwidth
    # the raw statistics have another scale: their width is their own median pairwise distance
    raw_width = args.bandwidth * float(torch.pdist(raw_coords).median())
    site_p, class_p, weight = purities(coords, site_arr, label_arr, args.neighbours, width)
    raw_site_p, raw_class_p, _ = purities(raw_coords, site_arr, label_arr, args.neighbours, raw_width)
    gated = (coords.norm(dim=1) <= ref.radius).numpy()
    print(
        f"{args.subset} split, {len(site_arr)} images; neighbourhoods of {args.neighbours}, "
        f"kernel width {args.bandwidth} x {ref.bandwidth:.2f}; mean over each site's images (%)"
    )
    print(
        f"{'site':<12} {'site pur.':>9} {'class pur.':>10} {'weight':>7} {'in radius':>9} | raw: site, class"
    )
    for s in sorted(set(sites)):
        m = site_arr == s
        print(
            f"{s:<12} {100 * site_p[m].mean():9.1f} {100 * class_p[m].mean():10.1f} {weight[m].mean():7.1f} "
            f"{100 * gated[m].mean():9.1f} | {100 * raw_site_p[m].mean():5.1f} {100 * raw_class_p[m].mean():5.1f}"
        )
    print(
        f"{'all':<12} {100 * site_p.mean():9.1f} {100 * class_p.mean():10.1f} {weight.mean():7.1f} "
        f"{100 * gated.mean():9.1f} | {100 * raw_site_p.mean():5.1f} {100 * raw_class_p.mean():5.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
