"""The generator of the bundled problem set (``python -m envs.code.bundled.generate``) and its families."""
