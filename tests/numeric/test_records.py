"""records.csv / summary.json I/O: exact round trip, streaming, truncation, refusal to overwrite."""

from __future__ import annotations

import json
import math
import os

import pytest

from crosscurv.numeric.records import (FIELDS, RecordsError, RecordWriter, count_rows, format_row,
                                       json_safe, make_record, parse_row, read_columns,
                                       read_records, read_summary, records_columns,
                                       truncate_records, write_summary)

AWKWARD = [1 / 3, -2.0**-1074, 1e308, -0.0, math.pi * 1e-300, 0.1 + 0.2, float("inf"), -float(
    "inf")]


def _rec(k: int, base: float) -> dict:
    vals = [base * (i + 1) / 7 for i in range(len(FIELDS) - 1)]
    return make_record(k, **dict(zip(FIELDS[1:], vals)))


def test_row_round_trip_is_exact_for_awkward_floats():
    for x in AWKWARD:
        rec = make_record(3, **{f: x for f in FIELDS[1:]})
        back = parse_row(format_row(rec))
        for f in FIELDS[1:]:
            assert back[f] == x and math.copysign(1, back[f]) == math.copysign(1, x), (f, x, back[
                f])
        assert back["k"] == 3
    nan = parse_row(format_row(make_record(1, **{f: float("nan") for f in FIELDS[1:]})))
    assert all(math.isnan(nan[f]) for f in FIELDS[1:])


def test_make_record_rejects_unknown_and_missing_fields():
    with pytest.raises(ValueError):
        make_record(1, bogus=1.0, **{f: 0.0 for f in FIELDS[1:]})
    with pytest.raises(KeyError):
        make_record(1, loss_jc=1.0)


def test_writer_streams_rows_before_close(tmp_path):
    path = str(tmp_path / "records.csv")
    w = RecordWriter(path)
    w.write(_rec(1, 0.5))
    w.write(_rec(2, 0.25))
    # not closed: another reader must already see both rows (flushed)
    rows = read_records(path)
    assert [r["k"] for r in rows] == [1, 2]
    assert rows[1] == _rec(2, 0.25)
    w.close()


def test_writer_refuses_to_overwrite_and_checks_header_on_append(tmp_path):
    path = str(tmp_path / "records.csv")
    with RecordWriter(path) as w:
        w.write(_rec(1, 1.0))
    with pytest.raises(RecordsError, match="refusing to overwrite"):
        RecordWriter(path)
    assert count_rows(path) == 1
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(RecordsError, match="not a crosscurv records file"):
        RecordWriter(str(other), append=True)
    with RecordWriter(path, append=True) as w:
        w.write(_rec(2, 1.0))
    assert count_rows(path) == 2


def test_the_writer_takes_any_columns_and_quotes_text_as_csv_does(tmp_path):
    """Tables with their own columns (advise's, the motivation runs'): ``k`` an integer, text
    CSV-quoted where it needs it, floats in round-trip form; read back by the csv module to the same
    values."""
    import csv

    cols = ("k", "pattern", "loss", "err")
    rows = [{"k": 1, "pattern": "gs:3,2,1", "loss": 0.1, "err": float("nan")},
            {"k": 1, "pattern": 'a"b', "loss": -2.5e-300, "err": float("inf")},
            {"k": 2, "pattern": "jc", "loss": 1 / 3, "err": 0.0}]
    path = str(tmp_path / "table.csv")
    with RecordWriter(path, fields=cols) as w:
        w.write_rows(rows[:2])
        w.write(rows[2])
    # nothing to quote: plain join
    assert format_row(rows[2], cols) == "2,jc," + repr(1 / 3) + ",0.0"
    with open(path, newline="") as fh:
        back = list(csv.reader(fh))
    assert back[0] == list(cols) and [r[1] for r in back[1:]] == ["gs:3,2,1", 'a"b', "jc"]
    assert [float(r[2]) for r in back[1:]] == [r["loss"] for r in rows]
    with pytest.raises(RecordsError, match="not a table with the columns"):
        RecordWriter(path, append=True, fields=("k", "other"))


def test_torn_last_line_is_ignored_and_truncation_keeps_exact_rows(tmp_path):
    path = str(tmp_path / "records.csv")
    with RecordWriter(path) as w:
        for k in range(1, 5):
            w.write(_rec(k, 1.0 / k))
    with open(path, "a") as fh:
        fh.write("5,0.1,0.2")  # a kill in the middle of a row
    rows = read_records(path)
    assert [r["k"] for r in rows] == [1, 2, 3, 4]
    truncate_records(path, 2)
    assert read_records(path) == [_rec(1, 1.0), _rec(2, 0.5)]
    assert open(path).read().endswith("\n")
    with pytest.raises(RecordsError, match="holds 2 complete records"):
        truncate_records(path, 3)
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_rows_out_of_order_and_malformed_rows_are_errors(tmp_path):
    path = tmp_path / "records.csv"
    header = ",".join(FIELDS)
    path.write_text(header + "\n" + format_row(_rec(2, 1.0)) + "\n")
    with pytest.raises(RecordsError, match="k=2"):
        read_records(str(path))
    path.write_text(header + "\n1,2,3\n")
    with pytest.raises(RecordsError, match="columns"):
        read_records(str(path))
    path.write_text(header + "\n1,x," + ",".join(["3"] * (len(FIELDS) - 2)) + "\n")
    with pytest.raises(RecordsError, match="not a number"):
        read_records(str(path))
    with pytest.raises(RecordsError, match="does not exist"):
        read_records(str(tmp_path / "missing.csv"))


def test_columns_view():
    cols = records_columns([_rec(1, 1.0), _rec(2, 2.0)])
    assert cols["k"] == [1, 2] and cols["gap"] == [_rec(1, 1.0)["gap"], _rec(2, 2.0)["gap"]]


def test_summary_is_strict_json_with_non_finite_as_null(tmp_path):
    path = str(tmp_path / "summary.json")
    text = write_summary(path, {"a": float("nan"), "b": [1.5, float("inf")], "c": {"d": -0.0}})
    assert "NaN" not in text and "Infinity" not in text
    assert read_summary(path) == {"a": None, "b": [1.5, None], "c": {"d": -0.0}}
    assert json.loads(text) == json_safe({"a": float("nan"), "b": [1.5, float("inf")], "c": {
        "d": -0.0}})


READ_COLS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk")


def test_read_columns(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("extra,k,gap,loss_s,loss_jc,recursive,cumulative,jc_only,bound_bk\nx,1,0.5,1,2,nan,inf,3,4\nx,2,0.25,1,2,0,0,3,4\n")
    got = read_columns(str(good))
    assert got["k"] == [1, 2] and got["gap"] == [0.5, 0.25] and math.isnan(got["recursive"][0])
    bad = [
        ("", "is empty"),
        ("k,loss_jc\n1,2\n", "missing column\\(s\\) loss_s, gap, recursive, cumulative, jc_only, "
                             "bound_bk"),
        (",".join(READ_COLS) + "\n", "no rows"),
        (",".join(READ_COLS) + "\n1,2,3,oops,5,6,7,8\n",
         "line 2, column gap: not a number \\('oops'\\)"),
        (",".join(READ_COLS) + "\n1.5,2,3,4,5,6,7,8\n", "k must be an integer"),
        (",".join(READ_COLS) + "\n1,2,3,4,5,6,7,8\n1,2,3,4,5,6,7,8\n", "k=1 appears twice"),
        (",".join(READ_COLS) + "\n1,2,3,4,5,6,7\n", "column bound_bk: not a number \\(''\\)"),
    ]
    for text, msg in bad:
        f = tmp_path / "bad.csv"
        f.write_text(text)
        with pytest.raises(RecordsError, match=msg):
            read_columns(str(f))
    with pytest.raises(RecordsError, match="does not exist"):
        read_columns(str(tmp_path / "none.csv"))
    with pytest.raises(RecordsError, match="is a directory"):
        read_columns(str(tmp_path))


@pytest.mark.parametrize("n", [8, 10])
def test_records_of_an_older_crosscurv_are_refused_in_one_line(tmp_path, n):
    """The eight- and ten-column files of earlier versions are named as such, not read with NaN
    columns."""
    path = tmp_path / "records.csv"
    path.write_text(",".join(FIELDS[:n]) + "\n" + ",".join(["1"] + ["0.5"] * (n - 1)) + "\n")
    with pytest.raises(RecordsError, match=rf"records of an older crosscurv \({n} columns, not "
                                           rf"the {len(FIELDS)} "
                                           r"of this version\); recompute the run with this "
                                           r"crosscurv$"):
        read_records(str(path))


def test_only_a_prefix_of_this_versions_columns_is_an_older_header():
    from crosscurv.numeric.records import CORE_FIELDS, is_older_header

    assert all(is_older_header(",".join(FIELDS[:n])) for n in range(len(CORE_FIELDS), len(FIELDS)))
    assert not is_older_header(",".join(FIELDS))  # this version's
    assert not is_older_header(",".join(FIELDS[:len(CORE_FIELDS) - 1]))  # not even the core columns
    # the columns in another order: a foreign file
    assert not is_older_header(",".join(FIELDS[:9][::-1]))
    assert not is_older_header("k,epoch,loss")


def test_a_row_of_fewer_columns_is_malformed(tmp_path):
    path = tmp_path / "records.csv"
    path.write_text(",".join(FIELDS) + "\n1,2.5,2.25,-0.25,-0.2,-0.3,-0.1,0.5\n")
    with pytest.raises(RecordsError, match=f"expected {len(FIELDS)} columns, got 8"):
        read_records(str(path))
