"""The ``jaxpapers`` command: list, usage errors (exit 2, nothing written), reproduce end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxpapers.cli import EXIT_BROKEN_PIPE, TABLE_HEADER, _build_parser, main, snapshot_note
from jaxpapers.core.papers import PAPERS


def test_list_shows_every_paper_and_status(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    for paper in PAPERS:
        (line,) = [ln for ln in out if ln.startswith(paper.id + " ")]
        assert paper.module in line
        assert ("implemented" if paper.implemented else "not yet") in line
    assert "implemented" in next(ln for ln in out if ln.startswith("P17"))


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "jaxpapers", "list"], capture_output=True, text=True, check=True
    )
    assert "P17" in out.stdout and "ievi" in out.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["reproduce", "P99"], "valid choices: P01"),
        (["reproduce", "P17", "--bogus"], "unrecognized arguments"),
        (["reproduce", "P17", "--seeds", "0"], "--seeds must be a positive"),
        (["reproduce", "P17", "--experiments", "nope"], "valid choices: model_error_matters"),
        (["reproduce", "P17", "--num-processes", "2"], "need --distributed"),
        (
            ["reproduce", "P17", "--distributed", "--coordinator", "127.0.0.1:1"],
            "give coordinator_address, num_processes and process_id together",
        ),
        (
            [
                *("reproduce", "P17", "--distributed", "--coordinator", "127.0.0.1:1"),
                *("--num-processes", "2", "--process-id", "2"),
            ],
            "expected 0 <= process_id < num_processes",
        ),
        (["bench", "no_such_bench"], "valid choices"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(out_dir)] if argv[0] != "frobnicate" else argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out_dir.exists()


def test_unimplemented_paper_is_a_usage_error(tmp_path, capsys):
    missing = [p.id for p in PAPERS if not p.implemented]
    if not missing:
        pytest.skip("every paper is implemented")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", missing[0], "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert "not implemented" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unwritable_output_folder_exits_2(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "P17", "--smoke", "--out", str(blocker / "results")])
    assert exc.value.code == 2
    assert "not writable" in capsys.readouterr().err
    assert blocker.read_text() == "not a folder"


def test_reproduce_writes_result_json_and_table(tmp_path, capsys):
    rc = main(
        [
            "reproduce",
            "P17",
            "--smoke",
            "--seeds",
            "2",
            "--out",
            str(tmp_path),
            "--experiments",
            "queries_gridworld_5pct_error",
        ]
    )
    assert rc == 0
    rec = json.loads((tmp_path / "P17" / "result.json").read_text())
    assert rec["paper"] == "P17" and rec["seeds"] == 2 and rec["size"] == "smoke"
    (exp,) = rec["experiments"]
    assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
    roles = {r["method"]: r["role"] for r in exp["rows"]}
    assert roles == {"VI": "baseline", "IE-VI": "method", "A-IE-VI": "method"}
    for row in exp["rows"]:
        assert len(row["seeds"]) == 2 and row["mean"] > 0
    table = (tmp_path / "RESULTS.md").read_text()
    assert "queries_gridworld_5pct_error" in table and exp["verdict"] in table
    assert (tmp_path / "P17" / "queries_gridworld_5pct_error.png").stat().st_size > 1000
    out = capsys.readouterr().out.splitlines()
    assert any("queries_gridworld_5pct_error" in ln for ln in out)
    # the verdict table has a header row naming its columns, above the rows
    header = out.index(TABLE_HEADER)
    assert any(ln.startswith("P17") for ln in out[header + 1 :])


@pytest.mark.parametrize("command", [["reproduce", "P17", "--smoke"], ["bench"]])
def test_empty_out_is_a_usage_error(command, tmp_path, capsys, monkeypatch):
    """``--out ""`` is the current folder to pathlib: refused, nothing written there."""
    monkeypatch.chdir(tmp_path)
    for out in ("", "  "):
        with pytest.raises(SystemExit) as exc:
            main([*command, "--out", out])
        assert exc.value.code == 2
        assert "--out must name a folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_closed_pipe_ends_quietly():
    """``jaxpapers list | head -1``: the reader leaves early; no traceback, status 141."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxpapers", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the interpreter has even imported jaxpapers
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_default_out_inside_the_clone_is_announced(tmp_path):
    """The default ``--out results`` run from the clone's root rewrites the committed snapshot:
    the command says so (stderr); any other folder gets no note."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a source checkout")
    note = snapshot_note(root / "results")
    assert note is not None and "committed" in note and "--out" in note
    assert snapshot_note(tmp_path) is None
    assert "committed snapshot" in " ".join(_build_parser().format_help().split()) or any(
        "committed snapshot" in " ".join(sub.format_help().split())
        for action in _build_parser()._actions
        if action.__class__.__name__ == "_SubParsersAction"
        for sub in action.choices.values()
    )


def test_reproduce_keeps_compiled_programs_in_the_cache_folder(tmp_path):
    import subprocess
    import sys

    cache = tmp_path / "xla"
    command = [
        sys.executable, "-m", "jaxpapers", "reproduce", "P17", "--smoke", "--seeds", "2",
        "--experiments", "queries_gridworld_5pct_error", "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    subprocess.run([*command, "--compile-cache", str(cache)], check=True, capture_output=True)
    assert any(p.is_file() for p in cache.rglob("*")), "no compiled program was cached"
    both = subprocess.run(
        [*command, "--compile-cache", str(cache), "--no-compile-cache"], capture_output=True
    )
    assert both.returncode == 2 and b"not allowed with" in both.stderr
    (tmp_path / "file").write_text("")
    bad = subprocess.run([*command, "--compile-cache", str(tmp_path / "file")], capture_output=True)
    assert bad.returncode == 2 and b"--compile-cache" in bad.stderr
