"""The commands that only read files answer without importing torch: ``crosscurv table`` of run
folders, and ``validate-records`` and ``report --check`` of a folder they cannot read (one line,
exit 2, in a fraction of the seconds that importing torch takes); so do the packages whose modules
such a command reads (``crosscurv.numeric``, ``crosscurv.experiments.tasks``: their names are
imported on first use). So do ``run``, ``advise`` and ``sweep`` given a setting that is out of range
whatever the task (the learning rate, ``K``, the optimizer, the preset, an unknown built-in task),
and ``run --resume`` of a folder that cannot be resumed (missing, no checkpoint, a checkpoint that
is not a whole archive, an unreadable summary or records)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_reading_commands_never_import_torch(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "records.csv").write_bytes(b"\xff\xfe\x00binary")
    (bad / "summary.json").write_text("{}")
    code = textwrap.dedent(f"""
        import contextlib, io, sys
        import crosscurv.numeric, crosscurv.experiments.tasks, crosscurv.experiments.tasks.errors
        from crosscurv.experiments.cli import main
        assert "torch" not in sys.modules
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ok = main(["table", "reports/runs/mlp", "reports/runs/fl", "reports/runs/lora"])
        codes = [ok]
        for argv in (["table", {str(bad)!r}], ["validate-records", {str(bad)!r}, "--reference", \
{str(bad)!r}],
                     ["report", "--check", {str(bad)!r}]):
            codes.append(main(argv))
        print("CODES", codes, "| Recursive" in out.getvalue())
        print("TORCH" if "torch" in sys.modules else "CLEAN")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-2:] == ["CODES [0, 2, 2, 2] True",
                                             "CLEAN"], proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("crosscurv: error: ")]
    assert len(errors) == 3, proc.stderr


def _bad_input_without_torch(argvs) -> list[str]:
    """Each command line of ``argvs`` through ``crosscurv.experiments.cli.main`` in one fresh
    interpreter: asserts that each exits 2 with one error line and that torch is never imported;
    returns the lines."""
    code = textwrap.dedent(f"""
        import sys
        from crosscurv.experiments.cli import main
        codes = [main(argv) for argv in {argvs!r}]
        print("CODES", codes)
        print("TORCH" if "torch" in sys.modules else "CLEAN")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-2:] == [f"CODES {[2] * len(argvs)}",
                                             "CLEAN"], proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("crosscurv: error: ")]
    assert len(errors) == len(argvs), proc.stderr
    return errors


def test_settings_out_of_range_are_answered_before_torch(tmp_path):
    out = str(tmp_path / "out")
    cases = [["run", "mlp", "--lr", "-1"], ["run", "mlp", "--iters", "0"], ["run", "mlp",
        "--optimizer", "momentum"],
             ["advise", "mlp", "--lr", "0"], ["advise", "mlp", "--iters", "0"], ["advise", "mlp",
             "--optimizer", "bogus"],
             ["sweep", "--task", "mlp", "--lr", "0"], ["sweep", "--task", "nope"]]
    _bad_input_without_torch([argv + ["--out", out] for argv in cases])
    assert not os.path.exists(out)


def test_a_folder_that_cannot_be_resumed_is_answered_before_torch(tmp_path):
    folders = {name: tmp_path / name for name in ("empty", "garbage", "truncated", "summary",
                                                  "records")}
    for name, folder in folders.items():
        folder.mkdir()
        if name == "empty":
            continue
        (folder / "checkpoint.pt").write_bytes(os.urandom(512) if name == "garbage" else _archive(
            name != "truncated"))
    (folders["summary"] / "summary.json").write_bytes(b"\x89PNG\r\n" + os.urandom(64))
    (folders["records"] / "records.csv").write_bytes(b"\xff\xfe\x00" + os.urandom(64))
    argvs = [["run", "mlp", "--resume", "--out", str(tmp_path / "missing")]] + [
        ["run", "mlp", "--resume", "--out", str(folder)] for folder in folders.values()]
    errors = _bad_input_without_torch(argvs)
    expected = ["nothing to resume", "has no checkpoint.pt",
                "not a readable crosscurv checkpoint (BadZipFile",
                "not a readable crosscurv checkpoint (BadZipFile",
                "summary.json is not a readable crosscurv summary",
                "records.csv is not a readable crosscurv records file"]
    for line, words in zip(errors, expected):
        assert words in line, (line, words)


def _archive(whole: bool) -> bytes:
    """A zip archive as ``torch.save`` writes one (made with ``zipfile``), or its first half."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("archive/data.pkl", os.urandom(2000))
    data = buf.getvalue()
    return data if whole else data[: len(data) // 2]


def test_the_lazy_packages_resolve_every_name():
    import crosscurv.experiments.tasks as tasks
    import crosscurv.numeric as numeric

    import crosscurv.numeric.optimizers as optimizers

    for package in (numeric, tasks, optimizers):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)
    assert numeric.tree.dot is not None  # a submodule by attribute, as before
    for package, name in ((numeric, "no_such_name"), (tasks, "no_such_name"), (optimizers,
                                                                               "no_such_name")):
        try:
            getattr(package, name)
        except AttributeError as exc:
            assert name in str(exc)
        else:
            raise AssertionError(f"{package.__name__}.{name} resolved")
