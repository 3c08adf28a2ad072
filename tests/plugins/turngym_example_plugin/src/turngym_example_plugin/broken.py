"""A plugin module that fails on import, as a package with a missing dependency would."""

import turngym_example_plugin_missing_dependency  # noqa: F401

BrokenEnv = None
