"""The suite's scheduling hint: the longest test files are handed to the xdist workers first."""

from types import SimpleNamespace

from tests import conftest


def test_xdist_keeps_the_collection_order_of_the_files():
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    conftest.pytest_configure(config)
    assert config.option.loadscopereorder is False
    # without xdist: nothing to change
    conftest.pytest_configure(SimpleNamespace(option=SimpleNamespace()))


def test_the_longest_files_come_first_and_every_file_keeps_its_own_order():
    longest = list(conftest.LONGEST_FILES[:2])
    nodeids = ["tests/a.py::t1", f"{longest[1]}::x", "tests/b.py::t1", f"{longest[0]}::y",
               "tests/a.py::t2", f"{longest[1]}::w"]
    items = [SimpleNamespace(nodeid=n) for n in nodeids]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [f"{longest[0]}::y", f"{longest[1]}::x", f"{longest[1]}::w",
                                         "tests/a.py::t1", "tests/b.py::t1", "tests/a.py::t2"]
