"""P08 STEAM and P12 RO-PMB: inference cost against the base models.

* ``steam_inference_over_base_time``: STEAM's video inference (routed DASH folded into the neck,
  frame- and video-level expert adapters, three tasks' experts) over the pretrained base model's
  inference on the same videos; the median of ABBA-paired ratios
  (:func:`jaxpapers.core.bench.paired_time_ratio`). Aim: <= 1.25.
* ``steam_frames_per_s`` / ``steam_base_frames_per_s``: frames / median inference time.
* ``ropmb_refine_over_cam_time``: RO-PMB pseudo-masks (CNN forward, CAM seeds, local prototypes,
  PRDC enrichment of the memory bank, context-aware refinement, cosine maps, arg-max) over plain
  CAM pseudo-masks (CNN forward, CAMs, constant background) of the same 32x32 images (report).
* ``ropmb_images_per_s`` / ``ropmb_cam_images_per_s``: images / median time.
"""

from __future__ import annotations

from jaxpapers.core.bench import bench_main, paired_time_ratio, row


def _steam_rows(quick: bool) -> list[dict]:
    from jaxpapers.steam.experiments._bench import steam_inference_pair

    fn, base, frames = steam_inference_pair(quick)
    repeats = 21 if quick else 31
    paired = paired_time_ratio(fn, base, repeats=repeats)
    return [
        row(
            "steam_inference_over_base_time",
            "ratio",
            paired["ratio"],
            "1",
            q25=paired["q25"],
            q75=paired["q75"],
            repeats=repeats,
            aim=1.25,
        ),
        row("steam_frames_per_s", "throughput", frames / paired["time"], "frames/s"),
        row("steam_base_frames_per_s", "throughput", frames / paired["baseline_time"], "frames/s"),
    ]


def _ropmb_rows(quick: bool) -> list[dict]:
    from jaxpapers.ropmb.experiments._bench import ropmb_pseudo_mask_pair

    fn, base, images = ropmb_pseudo_mask_pair(quick)
    repeats = 21 if quick else 31
    paired = paired_time_ratio(fn, base, repeats=repeats)
    return [
        row(
            "ropmb_refine_over_cam_time",
            "ratio",
            paired["ratio"],
            "1",
            q25=paired["q25"],
            q75=paired["q75"],
            repeats=repeats,
        ),
        row("ropmb_images_per_s", "throughput", images / paired["time"], "images/s"),
        row("ropmb_cam_images_per_s", "throughput", images / paired["baseline_time"], "images/s"),
    ]


def run(quick: bool = True) -> list[dict]:
    rows = _steam_rows(quick)
    ropmb = globals().get("_ropmb_rows")
    if ropmb is not None:
        rows += ropmb(quick)
    return rows


if __name__ == "__main__":
    bench_main("segmentation", run)
