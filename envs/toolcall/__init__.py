"""Tool calling over a fictional world: multi-hop questions and stateful tasks (see :mod:`envs.toolcall.env`)."""
