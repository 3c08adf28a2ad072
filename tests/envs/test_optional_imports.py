"""import_pinned: a missing or differently versioned optional dependency names its install command."""

import json

import pytest

from envs.optional import import_pinned


def test_the_pinned_version_is_returned():
    assert import_pinned("json", json.__version__, "pip install x", user="the test") is json


def test_a_missing_module_names_the_install_command():
    with pytest.raises(ImportError, match=r"^the test needs turngym_no_such_module: pip install x$"):
        import_pinned("turngym_no_such_module", "1.0", "pip install x", user="the test")


def test_another_version_names_both_versions_and_the_install_command():
    message = rf"^the test is pinned to json 0\.0, found {json.__version__}: pip install x$"
    with pytest.raises(ImportError, match=message):
        import_pinned("json", "0.0", "pip install x", user="the test")
