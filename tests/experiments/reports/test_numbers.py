"""The one number formatter of the reports."""

import math

import numpy as np

from crosscurv.experiments.reports.numbers import number, percent


def test_number_writes_three_significant_digits_by_default():
    assert number(0.012345) == "0.0123"
    assert number(np.float64(1234.5)) == "1.23e+03"
    assert number(3) == "3"


def test_number_takes_a_format_spec():
    assert number(2.0, ".1e") == "2.0e+00"
    assert number(0.5, ".4g") == "0.5"


def test_missing_values_are_written_as_told():
    assert number(None) == "nan"
    assert number(math.nan) == "nan"
    assert number(np.float32("nan"), missing="") == ""


def test_infinite_values_are_written_as_themselves_unless_told():
    assert number(math.inf) == "inf"
    assert number(-math.inf, ".1e") == "-inf"
    assert number(math.inf, infinite="nan") == "nan"
    assert number(1.5, infinite="nan") == "1.5"


def test_percent():
    assert percent(12.345) == "12.3%"
    assert percent(None, missing="n/a") == "n/a"
    assert percent(math.nan) == "nan"
