"""Row 15: every subcommand of the CLI's argparse tree, given a malformed argument, prints one
``error:`` line and exits with a documented rc (2 input/config, 3 registry, 4 output), never a
traceback. The tree is walked, so a command added later is covered without listing it here."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.faults.conftest import cli, docs, make_batch

BAD_DSN = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
DOCUMENTED_RCS = (2, 3, 4)


def _parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command path -> its parser: the main tree, and the commands that parse their own arguments."""
    from dedup_tasks.cli import _OWN_PARSERS, build_parser
    from dedup_tasks.embed.cross_training import build_parser as cross_parser
    from dedup_tasks.registry.cli import _parser as db_parser
    from dedup_tasks.stoplist_learn import build_parser as stoplist_parser

    own = {"db": db_parser(), "stoplist": stoplist_parser(), "cross-encoder": cross_parser()}
    assert set(own) == set(_OWN_PARSERS)  # a new command with its own parser must be listed here
    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        if path:
            out[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if not path and name in own:
                        walk(own[name], (name,))
                    else:
                        walk(sub, (*path, name))

    walk(build_parser(), ())
    return out


PARSERS = _parsers()


def _leaf(path: tuple[str, ...]) -> bool:
    """A path whose parser runs something (not one that only dispatches to a required subcommand)."""
    return not any(
        isinstance(a, argparse._SubParsersAction) and a.required for a in PARSERS[path]._actions
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("malformed")
    good = base / "good.parquet"
    pq.write_table(make_batch(docs("d", [1, 2, 3])), good)
    a_file = base / "a-file"
    a_file.write_text("not a directory")
    junk = base / "junk.parquet"
    junk.write_bytes(b"PAR1 this is not parquet")
    pairs = base / "pairs.jsonl"
    pairs.write_text('{"text1": "a", "text2": "b", "label": "seven"}\n')
    return {"base": base, "good": good, "a_file": a_file, "junk": junk, "pairs": pairs}


def _malformed(action: argparse.Action, files: dict[str, Path]) -> str:
    """A malformed value for an option (by its type, else by what it names)."""
    if action.choices:
        return "bogus-choice"
    if action.type in (int, float):
        return "x"
    by_dest = {
        "batch": "../../etc", "until": "2026-13-45T99", "week": "2026-W99", "root": str(files["a_file"]),
        "input": str(files["junk"]), "out": str(files["a_file"] / "x"), "layers": "", "set": "layers=",
        "db_url": BAD_DSN, "file": str(files["base"] / "missing.csv"), "threshold": "bogus=1",
        "pairs": str(files["pairs"]), "schema": "", "user": "", "spark_master": "bogus://nowhere",
    }
    return by_dest.get(action.dest, "../../\x7f")


def _base_args(path: tuple[str, ...], files: dict[str, Path]) -> list[str]:
    """Arguments that are valid on their own, so the malformed one is what fails (no registry started)."""
    return {
        ("run",): ["--no-registry", "--no-progress"],
        ("audit",): ["--root", str(files["base"]), "--week", "2026-W49", "--db-url", BAD_DSN],
        ("audit", "label"): ["--root", str(files["base"]), "--week", "2026-W49", "--db-url", BAD_DSN],
        ("audit", "whatif"): ["--root", str(files["base"]), "--week", "2026-W49", "--threshold", "minhash=0.8"],
        ("stoplist", "learn"): ["--input", str(files["good"]), "--out", str(files["base"] / "s.u32")],
        ("cross-encoder", "train"): ["--pairs", str(files["pairs"]), "--out", str(files["base"] / "m.pt")],
    }.get(path, [])


def _cases(files: dict[str, Path]) -> list[list[str]]:
    out = []
    for path in sorted(PARSERS):
        if not _leaf(path):
            out.append([*path])  # the required subcommand missing
            continue
        base = _base_args(path, files)
        out.append([*path, *base, "--no-such-option"])
        for action in PARSERS[path]._actions:
            if not action.option_strings or action.nargs == 0 or action.dest == "help":
                continue
            value = _malformed(action, files)
            # Options of `db` go before its subcommand word; of the others, after it.
            if path[0] == "db" and len(path) > 1 and action in PARSERS[("db",)]._actions:
                continue
            if path == ("audit", "whatif") and action.dest == "db_url":
                continue  # the replay reads decisions only, no database: any --db-url is unused
            out.append([*path, *base, action.option_strings[-1], value])
    db_globals = [a for a in PARSERS[("db",)]._actions if a.option_strings and a.dest != "help"]
    for action in db_globals:
        out.append(["db", action.option_strings[-1], _malformed(action, files), "status"])
    return out


def _run_main(argv: list[str], capsys) -> tuple[int, str]:
    from dedup_tasks.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    except Exception as exc:  # noqa: BLE001 - what the process would have printed as a traceback
        rc, tail = 1, f"Traceback: {type(exc).__name__}: {exc}"
        return rc, capsys.readouterr().err + tail
    return rc, capsys.readouterr().err


def test_the_walk_covers_every_command_of_the_issue():
    names = {path[0] for path in PARSERS}
    assert {"run", "show", "db", "audit", "stoplist", "cross-encoder"} <= names
    assert {("db", "status"), ("db", "compact"), ("audit", "whatif"), ("stoplist", "learn"), ("cross-encoder", "train")} <= set(PARSERS)


def test_every_subcommand_turns_a_malformed_argument_into_one_error_line(files, capsys, monkeypatch):
    # An unreachable database: a command that gets as far as the registry fails there (rc 3) at once,
    # and no embedded server is started for the walk.
    monkeypatch.setenv("DEDUP_DB_URL", BAD_DSN)
    monkeypatch.delenv("AIRFLOW_CONN_DEDUP_DB", raising=False)
    monkeypatch.setenv("DEDUP_ROOT", str(files["base"]))
    failures = []
    cases = _cases(files)
    assert len(cases) > 40
    for argv in cases:
        rc, err = _run_main(argv, capsys)
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        if rc not in DOCUMENTED_RCS or len(errors) != 1 or "Traceback" in err:
            failures.append((argv, rc, err[-400:]))
    assert not failures, json.dumps(failures, indent=1)
    assert not (files["base"] / "registry" / "pg").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--root", "R", "--batch", "../../etc"], "batch id '../../etc'"),
        (["run", "--root", "R", "--batch", "zz"], "does not exist"),
        (["run", "--partitions", "x"], "--partitions"),
        (["db", "compact", "--min-docs", "x"], "--min-docs"),
    ],
)
def test_the_process_prints_one_line_and_rc_2(tmp_path, args, needle):
    """As a user runs it: a subprocess, so nothing of the test's own error handling is involved."""
    args = [str(tmp_path / a) if a == "R" else a for a in args]
    result = cli(*args, env={"DEDUP_DB_URL": ""})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(errors) == 1 and needle in errors[0], result.stderr
