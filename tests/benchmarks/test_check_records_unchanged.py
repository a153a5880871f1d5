"""benchmarks/check_records_unchanged.py: the column diff finds the first differing iteration."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import check_records_unchanged as cru  # noqa: E402

from crosscurv.numeric.records import RecordWriter, make_record, read_records  # noqa: E402


def _write(path, rows):
    w = RecordWriter(str(path))
    for r in rows:
        w.write(r)
    w.close()


def _rows(n, bump_at=None, by=0.0):
    out = []
    for k in range(1, n + 1):
        loss = 2.0 - 0.01 * k + (by if bump_at is not None and k >= bump_at else 0.0)
        out.append(make_record(k, loss_jc=loss, loss_s=loss + 1e-4, gap=1e-4, recursive=1e-4, cumulative=1e-4,
                               jc_only=1e-4, bound_bk=1e-3, sharpness=1.0, gap_err=1e-9))
    return out


def test_identical_files_are_equal_bit_for_bit(tmp_path):
    _write(tmp_path / "a.csv", _rows(6))
    res = cru.compare(read_records(str(tmp_path / "a.csv")), read_records(str(tmp_path / "a.csv")))
    assert res["iterations"] == 6
    for c, r in res["columns"].items():
        assert r["equal"] == 6 and r["first_unequal"] is None and r["max_abs"] == 0.0, c


def test_first_unequal_and_parted_iterations(tmp_path):
    _write(tmp_path / "old.csv", _rows(8))
    _write(tmp_path / "new.csv", _rows(8, bump_at=3, by=1e-12))  # round-off from k = 3
    res = cru.compare(read_records(str(tmp_path / "new.csv")), read_records(str(tmp_path / "old.csv")), rtol=1e-6)
    col = res["columns"]["loss_jc"]
    assert col["first_unequal"] == 3 and col["first_parted"] is None and col["equal"] == 2
    _write(tmp_path / "far.csv", _rows(8, bump_at=5, by=1e-3))
    res = cru.compare(read_records(str(tmp_path / "far.csv")), read_records(str(tmp_path / "old.csv")), rtol=1e-6)
    assert res["columns"]["loss_jc"]["first_parted"] == 5
    assert res["columns"]["gap"]["equal"] == 8


def test_cli_reads_a_git_revision(tmp_path, capsys):
    _write(tmp_path / "new.csv", _rows(3))
    assert cru.main([str(tmp_path / "new.csv"), "--reference", str(tmp_path / "new.csv")]) == 0
    assert "3/3" in capsys.readouterr().out
    assert cru.main([str(tmp_path / "new.csv"), "--reference", "no-such-rev:nothing.csv"]) == 2


def test_gap_consistency_counts_gaps_beyond_their_error_bound():
    rows = _rows(4)  # gap 1e-4 = loss_s - loss_jc up to the float round-off of the sums
    assert cru.gap_consistency(rows)["beyond"] == 0
    rows[2]["gap"] = 1e-4 + 1e-5  # off by 1e-5 with gap_err 1e-9
    c = cru.gap_consistency(rows)
    assert c["beyond"] == 1 and c["first"] == 3 and c["worst_ratio"] > 10
    legacy = [{k: v for k, v in r.items() if k not in ("sharpness", "gap_err")} for r in rows]
    assert cru.gap_consistency(legacy) is None
