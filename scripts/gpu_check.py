"""``make gpu-check``: everything a CPU machine cannot show, in one run on one accelerator.

Three kinds of item, run in this order, each in its own subprocess with its own timeout:

* ``pallas``: the tests that CPU skips or answers differently: the compiled Pallas kernels
  (``tests/test_kernels_lqzo.py -k compiled``) and the backend-dependent kernel-path and scan
  tests (``tests/test_lqzo_kernel_path.py``, ``tests/test_lrnn_scan.py``);
* ``smoke``: ``jaxpapers reproduce --smoke PXX`` for every implemented paper;
* ``bench``: ``jaxpapers bench NAME`` at its default (quick) size for every script in
  ``benchmarks/``.

The whole run stops starting new items once ``--budget`` seconds (default 480: the 8 minutes a
device check gets) are spent; items not reached are listed as ``not run (budget)``. The table goes
to ``OUT/gpu/README.md`` (device, jax / jaxlib versions, one row per item: status, seconds, the
last line of its output) and ``OUT/gpu/gpu_check.json``; each item's full output goes to
``OUT/gpu/logs/``. Exit status: 0 when every item that ran passed, 1 otherwise.

``GPU_CHECK_DRY=1`` (or ``--dry``) makes it run unchanged on a CPU machine: it lists every item
and runs one cheap item of each kind in their place, through the same subprocess, timeout, log
and table code: the kernel-test files collected (``pytest --collect-only``), the command line
(``jaxpapers list``; one paper's smoke run takes minutes on two loaded cores), and an import of
every ``benchmarks/NAME.py`` with a check that it defines ``run``. The test suite runs this dry
mode (``tests/test_gpu_check.py``).

    python scripts/gpu_check.py [--out results] [--budget 480] [--dry]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PALLAS_TESTS = (
    ("kernels_compiled", ["tests/test_kernels_lqzo.py", "-k", "compiled"]),
    ("lqzo_kernel_path", ["tests/test_lqzo_kernel_path.py"]),
    ("lrnn_scan", ["tests/test_lrnn_scan.py"]),
)

_IMPORT_CHECK = """
import importlib.util, sys
from jaxpapers.core.bench import available_benchmarks, find_benchmarks_dir
names = available_benchmarks()
for name in names:
    spec = importlib.util.spec_from_file_location("gpu_check_" + name,
                                                  find_benchmarks_dir() / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "run", None)), name + " defines no run()"
print(f"{len(names)} benchmark scripts import and define run()")
"""


@dataclass
class Item:
    kind: str
    name: str
    argv: list[str]
    timeout: float
    status: str = "not run (budget)"
    seconds: float = 0.0
    detail: str = ""
    extra: dict = field(default_factory=dict)


def _python() -> str:
    return sys.executable


def _implemented_papers() -> list[str]:
    from jaxpapers.core.papers import PAPERS

    return [p.id for p in PAPERS if p.implemented]


#: Benchmarks about the CPU runner's own budget (every paper's quick run, twice): far longer than
#: the check's eight minutes, and not about the device.
CPU_ONLY_BENCHMARKS = frozenset({"quick_runs"})


def plan(out: Path, *, dry: bool) -> list[Item]:
    """Every item of the check, in order (dry: one cheap item of each kind)."""
    from jaxpapers.core.bench import available_benchmarks

    py = _python()
    scratch = out / "gpu" / "scratch"
    pytest_args = ["-q", "-x", "-n", "0", "-p", "no:cacheprovider"]
    items = [
        Item("pallas", name, [py, "-m", "pytest", *args, *pytest_args], 240)
        for name, args in PALLAS_TESTS
    ]
    items += [
        Item(
            "smoke",
            pid,
            [py, "-m", "jaxpapers", "reproduce", pid, "--smoke", "--out", str(scratch / "smoke")],
            300,
        )
        for pid in _implemented_papers()
    ]
    items += [
        Item(
            "bench",
            name,
            [py, "-m", "jaxpapers", "bench", name, "--out", str(scratch / "bench")],
            420,
        )
        for name in available_benchmarks()
        if name not in CPU_ONLY_BENCHMARKS
    ]
    if dry:
        for item in items:
            item.status = "listed (dry run)"
        files = [a for _, args in PALLAS_TESTS for a in args if a.endswith(".py")]
        items += [
            Item(
                "pallas",
                "collect_all",
                [py, "-m", "pytest", "--collect-only", *files, "-q", "-p", "no:cacheprovider"],
                120,
            ),
            Item("smoke", "cli_list", [py, "-m", "jaxpapers", "list"], 60),
            Item("bench", "import_all", [py, "-c", _IMPORT_CHECK], 120),
        ]
    return items


def run_item(item: Item, logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{item.kind}_{item.name}.log"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            item.argv,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=item.timeout,
            check=False,
        )
        text, code = proc.stdout, proc.returncode
        item.status = "pass" if code == 0 else f"FAIL (exit {code})"
    except subprocess.TimeoutExpired as err:
        out = err.stdout or ""
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        item.status = f"FAIL (timeout {item.timeout:.0f} s)"
    item.seconds = time.perf_counter() - t0
    log.write_text(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    item.detail = lines[-1][:160] if lines else ""


def device_info() -> dict[str, str]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jaxlib

    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    return {
        "backend": jax.default_backend(),
        "devices": f"{len(devices)} x {', '.join(kinds)}",
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
    }


def render(items: list[Item], info: dict[str, str], *, dry: bool, date: str) -> str:
    head = [
        "# GPU check",
        "",
        "Written by `make gpu-check` (`scripts/gpu_check.py`"
        + (", dry run: `GPU_CHECK_DRY=1`" if dry else "")
        + f") on {date}.",
        "",
        f"Device: {info['devices']} (backend `{info['backend']}`); "
        f"jax {info['jax']}, jaxlib {info['jaxlib']}.",
        "",
        "| kind | item | status | seconds | last line of output |",
        "|---|---|---|---|---|",
    ]
    body = [
        f"| {i.kind} | {i.name} | {i.status} | {i.seconds:.1f} | {i.detail.replace('|', '/')} |"
        for i in items
    ]
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/gpu_check.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", default="results", help="writes OUT/gpu/README.md")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run")
    parser.add_argument("--dry", action="store_true", help="as GPU_CHECK_DRY=1")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error(f"--budget={args.budget}; expected > 0")
    dry = args.dry or os.environ.get("GPU_CHECK_DRY", "") not in ("", "0")
    out = Path(args.out)
    (out / "gpu").mkdir(parents=True, exist_ok=True)
    items = plan(out, dry=dry)
    start = time.perf_counter()
    for item in items:
        if item.status != "not run (budget)":
            continue  # listed only (dry run)
        left = args.budget - (time.perf_counter() - start)
        if left <= 5:
            continue
        item.timeout = min(item.timeout, left)
        print(f"[{item.kind}] {item.name} ...", flush=True)
        run_item(item, out / "gpu" / "logs")
        print(f"[{item.kind}] {item.name}: {item.status} in {item.seconds:.1f} s", flush=True)
    # Only now does this process touch the device: JAX would otherwise hold (preallocate) GPU
    # memory in the parent while every item runs in a child.
    info = device_info()
    if not dry and info["backend"] not in ("gpu", "tpu"):
        print(f"warning: backend is {info['backend']!r}; the compiled-kernel tests skipped")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (out / "gpu" / "README.md").write_text(render(items, info, dry=dry, date=date))
    record = {"dry": dry, "date": date, **info, "items": [asdict(i) for i in items]}
    fd, tmp = tempfile.mkstemp(dir=out / "gpu", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, out / "gpu" / "gpu_check.json")
    failed = [i for i in items if i.status.startswith("FAIL")]
    skipped = [i for i in items if i.status == "not run (budget)"]
    print(
        f"{len(items) - len(failed) - len(skipped)} items passed or listed, {len(failed)} failed, "
        f"{len(skipped)} not run (budget); table: {out / 'gpu' / 'README.md'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
