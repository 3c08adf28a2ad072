"""Running untrusted code under hard limits (Docker, bubblewrap, plain process for trusted code)."""
