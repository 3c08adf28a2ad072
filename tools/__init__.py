"""Tools an agent can call (a Tool protocol, built-in tools, tool-call parsers)."""
