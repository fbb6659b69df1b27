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


def _paired_rows(
    fn, base, items: int, quick: bool, ratio: str, unit: str, per_s: tuple[str, str], aim=None
) -> list[dict]:
    """A paired time ratio ``fn / base`` and the throughput of each, ``items`` per call."""
    repeats = 21 if quick else 31
    paired = paired_time_ratio(fn, base, repeats=repeats)
    extra = {} if aim is None else {"aim": aim}
    return [
        row(
            ratio,
            "ratio",
            paired["ratio"],
            "1",
            q25=paired["q25"],
            q75=paired["q75"],
            repeats=repeats,
            **extra,
        ),
        row(per_s[0], "throughput", items / paired["time"], unit),
        row(per_s[1], "throughput", items / paired["baseline_time"], unit),
    ]


def _steam_rows(quick: bool) -> list[dict]:
    from jaxpapers.steam.experiments._bench import steam_inference_pair

    fn, base, frames = steam_inference_pair(quick)
    names = ("steam_frames_per_s", "steam_base_frames_per_s")
    return _paired_rows(
        fn, base, frames, quick, "steam_inference_over_base_time", "frames/s", names, aim=1.25
    )


def _ropmb_rows(quick: bool) -> list[dict]:
    from jaxpapers.ropmb.experiments._bench import ropmb_pseudo_mask_pair

    fn, base, images = ropmb_pseudo_mask_pair(quick)
    names = ("ropmb_images_per_s", "ropmb_cam_images_per_s")
    return _paired_rows(fn, base, images, quick, "ropmb_refine_over_cam_time", "images/s", names)


def run(quick: bool = True) -> list[dict]:
    return _steam_rows(quick) + _ropmb_rows(quick)


if __name__ == "__main__":
    bench_main("segmentation", run)
