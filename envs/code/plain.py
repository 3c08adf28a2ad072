"""A strict codec for plain values: what crosses the sandbox boundary of the judge, in both directions.

Standard library only and free of package imports: the judge prepends this file's source to the
harness that runs in the sandbox.

Only values whose type is *exactly* one of ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``,
``bytes``, ``list``, ``tuple``, ``dict``, ``set`` or ``frozenset`` (nested at most :data:`MAX_DEPTH`
deep) are encoded; anything else (a subclass of ``int``, an object with a custom ``__eq__``) raises
:class:`NotPlain`. Decoding builds genuine built-in objects, so comparing a decoded value never runs
code of the program that produced it. The encoded form is JSON: ``None``/``bool``/``int``/``str`` and
finite floats as themselves, lists as arrays, everything else as a one-key object (``{"tuple": [...]}``,
``{"dict": [[key, value], ...]}``, ``{"set": [...]}``, ``{"frozenset": [...]}``, ``{"bytes": hex}``,
``{"complex": [re, im]}``, ``{"float": "nan" | "inf" | "-inf"}``).
"""

import math

MAX_DEPTH = 100


class NotPlain(TypeError):
    """The value is not plain data (see the module docstring)."""


def encode_plain(value, depth=0):
    """``value`` as JSON-ready data; raises :class:`NotPlain` for anything that is not plain."""
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deep")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {"float": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if kind is list:
        return [encode_plain(item, depth + 1) for item in value]
    if kind is tuple or kind is set or kind is frozenset:
        items = [encode_plain(item, depth + 1) for item in value]
        return {kind.__name__: items}
    if kind is dict:
        return {"dict": [[encode_plain(k, depth + 1), encode_plain(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if kind is complex:
        return {"complex": [encode_plain(value.real), encode_plain(value.imag)]}
    raise NotPlain(f"a {kind.__name__} is not plain data")


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def decode_plain(data, depth=0):
    """The inverse of :func:`encode_plain`: genuine built-in objects; ValueError on malformed data."""
    if depth > MAX_DEPTH + 2:
        raise ValueError("nested too deep")
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is str or kind is float:
        return data
    if kind is list:
        return [decode_plain(item, depth + 1) for item in data]
    if kind is not dict or len(data) != 1:
        raise ValueError(f"malformed plain value: {str(data)[:80]}")
    ((tag, body),) = data.items()
    if tag == "tuple":
        return tuple(decode_plain(item, depth + 1) for item in _list(body))
    if tag == "set" or tag == "frozenset":
        items = [decode_plain(item, depth + 1) for item in _list(body)]
        return set(items) if tag == "set" else frozenset(items)
    if tag == "dict":
        return {decode_plain(k, depth + 1): decode_plain(v, depth + 1) for k, v in _pairs(body)}
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "complex":
        real, imag = _list(body)
        return complex(decode_plain(real, depth + 1), decode_plain(imag, depth + 1))
    if tag == "float" and body in _FLOATS:
        return _FLOATS[body]
    raise ValueError(f"malformed plain value with tag {tag!r}")


def _list(body):
    if type(body) is not list:
        raise ValueError("malformed plain value: a list was expected")
    return body


def _pairs(body):
    pairs = _list(body)
    if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
        raise ValueError("malformed plain dict")
    return pairs
