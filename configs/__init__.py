"""The Hydra config tree; a package so that installed copies find it with ``initialize_config_module("configs")``."""
