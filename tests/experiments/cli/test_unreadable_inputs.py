"""Every file the command line reads answers an undecodable, empty or truncated file with one line,
exit 2.

The files: a user's records CSV (``validate-records THEIRS.csv``), a run's ``records.csv`` and
``summary.json`` (``table RUN_DIR``, ``validate-records --reference RUN_DIR``, which is also how
golden cases are read back), and a task file (``run path.py:factory``). Each kind is given binary
garbage, text in another encoding (UTF-16, Latin-1), an empty file and a truncated one. Every kind
runs through :func:`crosscurv.experiments.cli.main` (the command's entry point, stderr and exit code
as a user sees them); the binary case of each file also runs the ``crosscurv`` command in a
subprocess, so a crash of the interpreter would fail too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN = os.path.join(ROOT, "reports", "runs", "mlp")

#: name -> bytes of a file no crosscurv reader can make sense of
BAD = {
    "binary": bytes(range(256)) * 3,
    "utf16": "k,loss_jc,loss_s,gap,recursive,cumulative,jc_only,bound_bk\n1,2,3,4,5,6,7,8\n".encode(
    "utf-16"),
    "latin1": "k,loss_jc,loss_s,gap,recursive,cumulative,jc_only,bound_bk\n1,2,3,4,5,6,7,8\n# "
              "d\xe9j\xe0\n".encode("latin-1"),
    "empty": b"",
    "truncated": b"k,loss_jc,loss_s,gap,recur",
}
#: a truncated JSON document (the summary of a killed writer without atomic replace)
BAD_JSON = {**{k: v for k, v in BAD.items() if k != "truncated"},
            "truncated": b'{"settings": {"dtype": "flo', "array": b"[1, 2]"}


class _Result:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def _crosscurv(*argv, subprocess_too=False):
    """Run ``crosscurv ARGV`` in this process (and, if asked, in a subprocess: both must agree)."""
    import contextlib
    import io

    from crosscurv.experiments.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    res = _Result(code, err.getvalue())
    if subprocess_too:
        env = {k: v for k, v in os.environ.items() if k != "CROSSCURV_DEBUG"}
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run([sys.executable, "-m", "crosscurv", *argv], capture_output=True,
                              text=True, timeout=120, cwd=ROOT, env=env)
        assert (proc.returncode, proc.stderr) == (res.returncode, res.stderr), (proc.stderr,
                                                                                res.stderr)
    return res


def _assert_one_line_error(proc, *words):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("crosscurv: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "CROSSCURV_DEBUG" not in proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def _run_dir(tmp_path, name, **files) -> str:
    d = tmp_path / name
    shutil.copytree(RUN, d)
    for fname, data in files.items():
        (d / fname.replace("_", ".")).write_bytes(data)
    return str(d)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_validate_records_theirs(tmp_path, kind):
    f = tmp_path / f"{kind}.csv"
    f.write_bytes(BAD[kind])
    _assert_one_line_error(_crosscurv("validate-records", str(f), "--reference", RUN,
                                      subprocess_too=kind == "binary"), f"{kind}.csv")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_run_records_csv(tmp_path, kind):
    d = _run_dir(tmp_path, kind, records_csv=BAD[kind])
    _assert_one_line_error(_crosscurv("table", d, subprocess_too=kind == "binary"), "records.csv")
    theirs = os.path.join(RUN, "records.csv")
    _assert_one_line_error(_crosscurv("validate-records", theirs, "--reference", d), "records.csv")


@pytest.mark.parametrize("kind", sorted(BAD_JSON))
def test_run_summary_json(tmp_path, kind):
    d = _run_dir(tmp_path, kind, summary_json=BAD_JSON[kind])
    _assert_one_line_error(_crosscurv("table", d, subprocess_too=kind == "binary"), "summary.json")
    theirs = os.path.join(RUN, "records.csv")
    _assert_one_line_error(_crosscurv("validate-records", theirs, "--reference", d), "summary.json")


def test_golden_case_read_back(tmp_path):
    """A golden case folder is read back as a reference run directory; a damaged one is one line."""
    out = tmp_path / "golden"
    from crosscurv.experiments.conformance.golden import write_golden

    write_golden(str(out), ["quadratic"])
    ref = out / "quadratic" / "gs"
    theirs = str(ref / "records.csv")
    assert _crosscurv("validate-records", theirs, "--reference", str(ref)).returncode == 0
    (ref / "summary.json").write_bytes(BAD["binary"])
    _assert_one_line_error(_crosscurv("validate-records", theirs, "--reference", str(ref),
                                      subprocess_too=True),
                           "summary.json")
    (ref / "records.csv").write_bytes(BAD["utf16"])
    _assert_one_line_error(_crosscurv("validate-records", theirs, "--reference", str(ref)),
                           "records.csv")


@pytest.mark.parametrize("kind", ["binary", "latin1", "empty", "truncated"])
def test_task_file(tmp_path, kind):
    data = {"latin1": 'x = "d\xe9j\xe0"\ndef factory():\n    pass\n'.encode("latin-1"),
            "truncated": b"def factory(:\n"}.get(kind, BAD[kind])
    f = tmp_path / "mytask.py"
    f.write_bytes(data)
    _assert_one_line_error(_crosscurv("run", f"{f}:factory", "--lr", "0.1", "--iters", "1",
                                      "--out", str(tmp_path / "out"), subprocess_too=kind
                                      == "binary"), "mytask.py")
