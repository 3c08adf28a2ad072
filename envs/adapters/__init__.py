"""Adapters that expose other frameworks' environments as turngym :class:`envs.core.TextEnv` environments.

One module per framework, each registered under a short id in :mod:`envs` (``textarena``, ``verifiers``,
``openenv``, ``reasoning_gym``). Their dependencies are optional: nothing here is imported until an
adapter is built, and a missing package raises an error that names the install command.
"""
