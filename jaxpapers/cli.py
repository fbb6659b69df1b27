"""The ``jaxpapers`` command: ``list``, ``reproduce``, ``serve`` and ``bench``.

Exit status: 0 on success, 2 on a usage error (unknown paper, bad flag, empty or unwritable output
folder), 1 when an experiment or benchmark itself fails, 141 (128 + SIGPIPE, as for any Unix
filter) when the reader of the output went away (``jaxpapers list | head``), without a traceback.

``--out`` defaults to ``results`` in the current folder. Inside a clone of the repository that is
the committed snapshot of the last run: ``reproduce`` and ``bench`` rewrite it (and say so on
stderr); pass ``--out DIR`` to write elsewhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from jaxpapers.core.papers import PAPERS, Paper, get_paper

#: What a shell reports for a process killed by SIGPIPE (the reader of its output went away).
EXIT_BROKEN_PIPE = 128 + 13
#: The repository this package was imported from (a source checkout), whose ``results/`` folder
#: holds the committed snapshot; None for an installed package.
_REPO = Path(__file__).resolve().parents[1]
#: The header of the verdict table that ``reproduce`` prints (the rows come from
#: ``jaxpapers.core.experiment.render_text``: paper, experiment id, verdict, then each row's
#: method and mean ± std over seeds).
TABLE_HEADER = f"{'id':<4} {'experiment':<24} {'verdict':<14} rows (method: mean ± std over seeds)"
_OUT_HELP = (
    "results folder (default: results in the current folder; inside a clone of the repository "
    "that is the committed snapshot, which this run rewrites)"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits with status 2 too; keep one line
        self.exit(2, f"jaxpapers: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jaxpapers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="list the nineteen papers and which are implemented")

    rep = sub.add_parser("reproduce", help="run the papers' experiments and write the results")
    rep.add_argument("papers", nargs="*", help="paper ids (P17) or module names; default: all")
    size = rep.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        dest="size",
        action="store_const",
        const="quick",
        help="CPU-sized runs, about a minute a paper (default)",
    )
    size.add_argument(
        "--full",
        dest="size",
        action="store_const",
        const="full",
        help="the larger setting, for a GPU/TPU",
    )
    size.add_argument(
        "--smoke",
        dest="size",
        action="store_const",
        const="smoke",
        help="tiny sizes for tests; numbers are not meaningful",
    )
    rep.add_argument("--out", default="results", help=_OUT_HELP)
    rep.add_argument("--seeds", type=int, default=None, help="number of seeds (default per size)")
    rep.add_argument(
        "--experiments",
        default=None,
        metavar="ID,ID",
        help="run only these experiment ids (comma-separated; one paper only); the paper's "
        "other experiments already in result.json at the same size and seeds are kept",
    )
    rep.add_argument(
        "--resume",
        action="store_true",
        help="keep finished experiments and continue from the last checkpoints",
    )
    rep.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process jax.distributed run first (cluster auto-detection, or the "
        "three flags below); process 0 writes the results",
    )
    rep.add_argument("--coordinator", default=None, metavar="HOST:PORT")
    rep.add_argument("--num-processes", type=int, default=None)
    rep.add_argument("--process-id", type=int, default=None)
    cache = rep.add_mutually_exclusive_group()
    cache.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="keep compiled programs in DIR and reuse them in later runs (default: "
        "$JAXPAPERS_CACHE_DIR, else ~/.cache/jaxpapers/xla); results are unchanged",
    )
    cache.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile every program afresh (no persistent compilation cache)",
    )
    rep.set_defaults(size="quick")

    srv = sub.add_parser(
        "serve", help="serve local chat models through an OpenAI-compatible API (extra [serve])"
    )
    srv.add_argument(
        "models",
        nargs="*",
        metavar="NAME|MODULE:FACTORY",
        help="'audit' (the P11 roles: auditor, target, scorer, user), 'echo', or MODULE:FACTORY "
        "naming a ChatModel or a function returning one (or a dict of them); default: audit",
    )
    srv.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 = any)")

    ben = sub.add_parser("bench", help="run benchmark scripts from benchmarks/")
    ben.add_argument("names", nargs="*", help="benchmark names; default: all")
    ben.add_argument("--out", default="results", help="writes OUT/bench/NAME.json; " + _OUT_HELP)
    ben.add_argument("--full", action="store_true", help="larger sizes (GPU/TPU)")
    return parser


def _check_writable(parser: argparse.ArgumentParser, out: str) -> Path:
    if not out.strip():
        # Path("") is the current folder: an empty --out would scatter results there.
        parser.error(f"--out must name a folder, got {out!r}")
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-test")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        parser.error(f"output folder {out!r} is not writable ({err.strerror or err})")
    return path


def snapshot_note(out: Path) -> str | None:
    """A warning when ``out`` is the ``results/`` snapshot committed with this source checkout."""
    snapshot = _REPO / "results"
    if not (_REPO / ".git").exists() or not snapshot.is_dir():
        return None
    if out.resolve() != snapshot.resolve():
        return None
    return (
        f"note: writing into {snapshot}, the results snapshot committed with this clone "
        "(`git diff results` shows what changed; --out DIR writes elsewhere)"
    )


def _resolve_papers(parser: argparse.ArgumentParser, names: Sequence[str]) -> list[Paper]:
    if not names:
        return [p for p in PAPERS if p.implemented]
    papers = []
    for name in names:
        try:
            paper = get_paper(name)
        except ValueError:
            valid = ", ".join(p.id for p in PAPERS)
            parser.error(f"unknown paper {name!r}; valid choices: {valid}")
        if not paper.implemented:
            done = ", ".join(p.id for p in PAPERS if p.implemented) or "none"
            parser.error(f"paper {paper.id} is not implemented yet; implemented: {done}")
        papers.append(paper)
    return papers


def _cmd_list() -> int:
    print(f"{'id':<4}  {'module':<13} {'status':<15} title")
    for p in PAPERS:
        status = "implemented" if p.implemented else "not yet"
        print(f"{p.id:<4}  {p.module:<13} {status:<15} {p.title}")
    return 0


def _cmd_reproduce(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds must be a positive integer, got {args.seeds}")
    papers = _resolve_papers(parser, args.papers)
    from jaxpapers.core.compilation import use_compile_policy

    # The run size's compile policy, before anything is compiled (see core.compilation).
    use_compile_policy(args.size)
    explicit = (args.coordinator, args.num_processes, args.process_id)
    if any(v is not None for v in explicit) and not args.distributed:
        parser.error("--coordinator/--num-processes/--process-id need --distributed")
    if args.distributed:
        from jaxpapers.core import distributed

        try:
            distributed.initialize(*explicit)
        except ValueError as err:
            parser.error(str(err))
    from jaxpapers.core.distributed import is_primary
    from jaxpapers.core.experiment import experiments_for, render_markdown, render_text, run_paper

    only = None
    if args.experiments is not None:
        if len(papers) != 1:
            parser.error("--experiments needs exactly one paper")
        only = [e.strip() for e in args.experiments.split(",") if e.strip()]
        valid = [e.id for e in experiments_for(papers[0])]
        unknown = [e for e in only if e not in valid]
        if unknown or not only:
            parser.error(
                f"unknown experiment {unknown[0] if unknown else '(none)'!r} for {papers[0].id}; "
                f"valid choices: {', '.join(valid)}"
            )
    out = _check_writable(parser, args.out)
    if not args.no_compile_cache:
        from jaxpapers.core.compilation import enable_compilation_cache

        try:
            enable_compilation_cache(args.compile_cache)
        except (ValueError, OSError) as err:
            parser.error(f"--compile-cache: {err}")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if (note := snapshot_note(out)) and is_primary():
        log(note)

    records = []
    for paper in papers:
        records.append(
            run_paper(
                paper,
                out,
                size=args.size,
                seeds=args.seeds,
                resume=args.resume,
                only=only,
                log=log,
            )
        )
        # Regenerate the table after every paper so an interrupted run still has a current one.
        if is_primary():
            (out / "RESULTS.md").write_text(render_markdown(out))
    print(TABLE_HEADER)
    print(render_text(records))
    print(f"\nwrote {out / 'RESULTS.md'}")
    return 0


def _cmd_bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from jaxpapers.core.bench import available_benchmarks, render_rows, run_benchmark

    names = available_benchmarks()
    if not names:
        parser.error("no benchmarks/ folder found: run `jaxpapers bench` from a source checkout")
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; valid choices: {', '.join(names)}")
    out = _check_writable(parser, args.out)
    if note := snapshot_note(out):
        print(note, file=sys.stderr, flush=True)
    for name in args.names or names:
        rows = run_benchmark(name, out, quick=not args.full)
        print(f"== {name} ({out / 'bench' / (name + '.json')})")
        print(render_rows(rows))
    return 0


def _serve_models(parser: argparse.ArgumentParser, specs: Sequence[str]) -> dict:
    import importlib

    from jaxpapers.core.chat import ChatModel, FunctionChatModel

    models: dict = {}
    for spec in specs or ["audit"]:
        if spec == "audit":
            from jaxpapers.audit import USER, make_scorer, make_target, make_writer

            models.update(
                auditor=make_writer(),
                target=make_target(),
                scorer=make_scorer(),
                user=make_writer(config=USER, name="user"),
            )
        elif spec == "echo":
            models["echo"] = FunctionChatModel(lambda m: m[-1]["content"], name="echo")
        elif ":" in spec:
            module, _, attr = spec.partition(":")
            try:
                obj = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as err:
                parser.error(f"cannot load {spec!r}: {err}")
            if callable(obj) and not isinstance(obj, ChatModel):
                obj = obj()
            found = obj if isinstance(obj, dict) else {getattr(obj, "name", attr): obj}
            for name, model in found.items():
                if not isinstance(model, ChatModel):
                    parser.error(f"{spec!r} gave {type(model).__name__}; expected a ChatModel")
                models[name] = model
        else:
            parser.error(f"unknown model {spec!r}; expected 'audit', 'echo' or MODULE:FACTORY")
    return models


def _cmd_serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        parser.error("jaxpapers serve needs the [serve] extra: pip install 'jaxpapers[serve]'")
    from jaxpapers.core.chat import create_app

    models = _serve_models(parser, args.models)
    print(f"serving {', '.join(models)} on http://{args.host}:{args.port}/v1", flush=True)
    uvicorn.run(create_app(models), host=args.host, port=args.port, log_level="warning")
    return 0


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "list":
        return _cmd_list()
    if args.command == "reproduce":
        return _cmd_reproduce(parser, args)
    if args.command == "serve":
        return _cmd_serve(parser, args)
    return _cmd_bench(parser, args)


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so that the interpreter's final flush of
    what is still buffered does not raise a second BrokenPipeError at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):  # not a real file (pytest's capture): nothing to flush
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        status = _dispatch(parser, args)
        sys.stdout.flush()  # a closed pipe surfaces here rather than at interpreter exit
    except BrokenPipeError:
        _silence(sys.stdout)
        return EXIT_BROKEN_PIPE
    return status


if __name__ == "__main__":
    raise SystemExit(main())
