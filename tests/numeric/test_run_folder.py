"""What a run folder must hold to be resumed, checked from its files (crosscurv.numeric.run_folder).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from crosscurv.numeric.records import FIELDS
from crosscurv.numeric.run_folder import (ResumeError, check_checkpoint_archive,
                                          check_records_header, check_resumable)


def _folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    torch.save({"format": 2, "vectors": {"theta_j": {"w": torch.ones(300)}}}, folder
               / "checkpoint.pt")
    (folder / "summary.json").write_text(json.dumps({"settings": {"lr": 0.1}}))
    (folder / "records.csv").write_text(",".join(FIELDS) + "\n")
    return folder


def test_a_whole_folder_passes_and_each_damage_is_named(tmp_path):
    folder = _folder(tmp_path)
    check_resumable(folder)
    with pytest.raises(ResumeError, match="nothing to resume: .* does not exist"):
        check_resumable(tmp_path / "missing")
    data = (folder / "checkpoint.pt").read_bytes()
    (folder / "checkpoint.pt").write_bytes(data[: len(data) // 2])  # a torch.save archive cut short
    with pytest.raises(ResumeError, match=r"checkpoint.pt is not a readable crosscurv checkpoint "
                                          r"\(BadZipFile"):
        check_resumable(folder)
    (folder / "checkpoint.pt").unlink()
    with pytest.raises(ResumeError, match="has no checkpoint.pt"):
        check_resumable(folder)


def test_summary_and_records_are_read_as_the_protocol_reads_them(tmp_path):
    folder = _folder(tmp_path)
    (folder / "summary.json").write_text("[1, 2]")
    with pytest.raises(ResumeError, match="summary.json is not a crosscurv summary"):
        check_resumable(folder)
    (folder / "summary.json").write_bytes(b"\xff\x00")
    with pytest.raises(ResumeError, match=r"summary.json is not a readable crosscurv summary "
                                          r"\(UnicodeDecodeError\)"):
        check_resumable(folder)
    (folder / "summary.json").unlink()  # a run killed before its first summary: still resumable
    check_resumable(folder)
    records = folder / "records.csv"
    records.write_text(",".join(FIELDS[:9]) + "\n")  # an older crosscurv's columns
    with pytest.raises(ResumeError, match="older crosscurv"):
        check_records_header(str(records))
    records.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ResumeError, match="not a readable crosscurv records file"):
        check_resumable(folder)
    records.write_text("")  # empty: the protocol writes the header
    check_resumable(folder)


def test_a_file_that_is_not_an_archive_is_refused_in_one_line(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"\x80\x04" + b"x" * 500)
    with pytest.raises(ResumeError) as err:
        check_checkpoint_archive(str(path))
    assert len(str(err.value).splitlines()) == 1 and "BadZipFile" in str(err.value)


def test_the_module_imports_no_torch():
    code = "import sys, crosscurv.numeric.run_folder; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr
