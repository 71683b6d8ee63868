"""A JSON Schema given as JSON text: parsed, with errors that say where.

:func:`load_schema` is the one place a schema's text becomes Python data (the
compiler, the engine and the server all go through it). A document nested
too deeply for Python's recursive parser (``json.loads`` raises
``RecursionError``, about 1,000 levels), or for the front-end's recursive
compile, is a :class:`~leapgen.errors.SchemaError` at the JSON pointer of its
deepest container, found by iterative scans (:func:`deepest_in_text`,
:func:`deepest_in_data`) that never recurse: a client error, never a crash.
"""

from __future__ import annotations

import json
import re

from leapgen.errors import SchemaError

from .refs import join_pointer

#: A JSON string, or one structural character (the rest of the text is not looked at).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.S)
#: Containers named in the pointer of an error about depth: the path to the deepest one goes on below it
#: (a pointer 1,000 levels deep would make a message of kilobytes).
POINTER_LEVELS = 32


def load_schema(schema):
    """``schema`` as Python data: JSON text (``str``, ``bytes``) parsed, anything else returned as is. Pure.

    Raises
    ------
    SchemaError
        The text is not JSON (pointer ``""``), or nests too deeply to parse
        (the pointer of its deepest container).
    """
    if not isinstance(schema, (str, bytes, bytearray)):
        return schema
    try:
        return json.loads(schema)
    except RecursionError:
        text = schema if isinstance(schema, str) else bytes(schema).decode("utf-8", "replace")
        depth, ptr = deepest_in_text(text)
        raise SchemaError(f"the schema's JSON nests {depth} levels deep, too deeply to parse{_below(depth)}",
                          pointer=ptr) from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise SchemaError(f"the schema is not valid JSON: {exc}", pointer="") from None


def too_deep(schema) -> SchemaError:
    """The error for a schema (data) whose compile ran out of recursion depth, at its deepest container."""
    depth, ptr = deepest_in_data(schema)
    return SchemaError(f"the schema nests (or merges recursive subschemas) too deeply to compile ({depth} levels "
                       f"of JSON at the deepest point){_below(depth)}", pointer=ptr)


def _below(depth: int) -> str:
    return "; its deepest container is further down, below this pointer" if depth > POINTER_LEVELS + 1 else ""


def deepest_in_data(data) -> tuple[int, str]:
    """(depth, JSON pointer) of the first deepest container (object or array) of ``data``, the pointer cut
    after :data:`POINTER_LEVELS` levels; (0, "") for a scalar."""
    best = (0, "")
    todo = [(data, 1, "")]
    while todo:
        node, depth, ptr = todo.pop()
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth > best[0]:
            best = (depth, ptr)
        todo.extend((v, depth + 1, join_pointer(ptr, k) if depth <= POINTER_LEVELS else ptr)
                    for k, v in reversed(list(items)))
    return best


def deepest_in_text(text: str) -> tuple[int, str]:
    """(depth, JSON pointer) of the first deepest container opened in JSON ``text`` (read as far as it
    goes: malformed text is scanned too), the pointer cut after :data:`POINTER_LEVELS` levels."""
    best = (0, "")
    open_: list[list] = []  # per open container: [is_object, member name or item index, a key comes next]
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in "{[":
            if len(open_) + 1 > best[0]:
                best = (len(open_) + 1, join_pointer("", *(str(c[1]) for c in open_[:POINTER_LEVELS])))
            open_.append([tok == "{", "" if tok == "{" else 0, tok == "{"])
        elif not open_:
            continue
        elif tok in "}]":
            open_.pop()
        elif tok == ",":
            top = open_[-1]
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
        elif tok != ":" and open_[-1][0] and open_[-1][2]:  # a member name
            try:
                open_[-1][1] = json.loads(tok)
            except ValueError:
                open_[-1][1] = tok[1:-1]
            open_[-1][2] = False
    return best
