"""One schema per analysis config: each field of a config dataclass says once what it is.

A config field declared with :func:`setting` carries its help text, its command-line flag,
its spec key, its kind and its choices in the field's metadata. From that one declaration:

- :func:`document` writes the class's numpydoc ``Parameters`` section (the API docs);
- :func:`add_options` adds the command's options (``saturation compare --horizon N``), with
  the help text and the config's default;
- :func:`given` reads back the options the user gave, as the config's keyword arguments;
- :func:`spec_keys` and :func:`spec_choices` are the ``[model]`` keys a spec of that kind
  accepts and their allowed values (:mod:`saturation.spec`).

The values are checked by the config's own ``validate()``: one check for the CLI, the specs
and the Python API. Nothing here imports numpy: the CLI builds its parser in milliseconds.

Kinds (the spec's words for them): ``"string"``, ``"number"``, ``"integer"``, ``"boolean"``,
``"list of strings"`` (comma-separated on the command line), ``"list of numbers"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

STR, NUM, INT, BOOL, STRS, NUMS = "string", "number", "integer", "boolean", "list of strings", "list of numbers"
KINDS = (STR, NUM, INT, BOOL, STRS, NUMS)
#: the ranges a field may declare (``setting(check=...)``), each with the words of its message
CHECKS = {
    "positive": "a positive number",
    "non-negative": "a number >= 0",
    "finite": "a finite number",
    "count": "a whole number >= 1",
}


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = "",
    spec: str | None = "",
    kind: str | None = None,
    choices: Sequence[str] | None = None,
    metavar: str | None = None,
    check: str | None = None,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
) -> Any:
    """A config dataclass field with its documentation and its front ends.

    Parameters
    ----------
    default : object, optional
        The field's default.
    help : str
        What the field is, in one or two sentences (the docstring's and the CLI's text).
    flag : str or None
        The command-line option: ``""`` (default) ``--field-name``; None: not an option.
    spec : str or None
        The spec's ``[model]`` key: ``""`` (default) the field's name; None: not a spec key.
    kind : str, optional
        One of :data:`KINDS` (default: from the field's type).
    choices : sequence of str, optional
        The allowed values.
    metavar : str, optional
        The option's value in the CLI help (default: from the kind).
    check : str, optional
        The value's range, one of :data:`CHECKS` (:func:`problems` reports a value outside it;
        None is always allowed).
    default_factory : callable, optional
        The default's factory (a mutable default).

    Returns
    -------
    dataclasses.Field
        The field, its metadata the above.
    """
    meta = {"help": help, "flag": flag, "spec": spec, "kind": kind, "choices": tuple(choices) if choices else None}
    meta["metavar"] = metavar
    if check is not None and check not in CHECKS:
        raise ValueError(f"check must be one of {list(CHECKS)}, got {check!r}")
    meta["check"] = check
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _settings(cls: type) -> Iterator[tuple[dataclasses.Field[Any], dict[str, Any]]]:
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            yield f, dict(f.metadata)


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls, vars(module) if module else None)


def _kind(hint: Any) -> str:
    """The kind of a type hint: ``int``, ``float``, ``str``, ``bool``, ``tuple[str, ...]``,
    each optionally ``| None``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0] if len(args) == 1 else hint
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        inner = typing.get_args(hint)[0]
        return NUMS if inner in (float, int) else STRS
    return {bool: BOOL, int: INT, float: NUM, str: STR}.get(hint, STR)


@functools.cache
def kinds(cls: type) -> dict[str, str]:
    """Every declared field's kind, by field name.

    Parameters
    ----------
    cls : type
        A config dataclass.

    Returns
    -------
    dict
        ``{field: kind}`` for the fields declared with :func:`setting`.
    """
    hints = _hints(cls)
    return {f.name: meta["kind"] or _kind(hints[f.name]) for f, meta in _settings(cls)}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _default_words(value: Any) -> str:
    if value is None or value is dataclasses.MISSING:
        return ""
    if isinstance(value, bool):
        return "" if not value else "on"
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if isinstance(value, int | str) else ""


def document(cls: type) -> type:
    """Class decorator: append a numpydoc ``Parameters`` section built from the fields'
    :func:`setting` help texts (type, default and choices included) to the docstring.

    Parameters
    ----------
    cls : type
        A config dataclass.

    Returns
    -------
    type
        The same class.
    """
    hints = _hints(cls)
    lines = ["", "Parameters", "----------"]
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if "help" not in meta:
            continue
        type_words = _type_words(hints[f.name])
        default = _default_words(_default(f))
        lines.append(f"{f.name} : {type_words}")
        extra = []
        if meta["choices"]:
            extra.append("one of " + ", ".join(f'"{c}"' for c in meta["choices"]))
        if default:
            extra.append(f"default {default}")
        text = meta["help"] + (f" ({'; '.join(extra)})" if extra else "")
        lines += ["    " + line for line in _wrap(text)]
    doc = (cls.__doc__ or "").rstrip()
    cls.__doc__ = doc + "\n" + "\n".join("    " + line if line else "" for line in lines) + "\n"
    return cls


def _type_words(hint: Any) -> str:
    """A field's type as its docstring names it: ``float or None``, ``tuple of str``,
    ``dict``, ``PlateauConfig or None``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    is_union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    optional = is_union and len(args) < len(typing.get_args(hint))
    if is_union and len(args) == 1:
        hint = args[0]
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        words = f"tuple of {getattr(typing.get_args(hint)[0], '__name__', 'object')}"
    elif origin is dict:
        words = "dict"
    else:
        words = getattr(hint, "__name__", str(hint))
    return words + (" or None" if optional else "")


def _wrap(text: str, width: int = 88) -> list[str]:
    out, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return out + ([line] if line else [])


def _flag(f: dataclasses.Field[Any], meta: dict[str, Any]) -> str | None:
    flag = meta["flag"]
    return None if flag is None else flag or "--" + f.name.replace("_", "-")


class OptionValueError(Exception):
    """A command-line value that is not a list of names: a usage error (exit 2) with its
    message as it stands (not argparse's "invalid value", which hides the reason)."""


def _dest(flag: str) -> str:
    """The parsed option's attribute: the flag without dashes (``--pass-rope``: ``pass_rope``)."""
    return flag.lstrip("-").replace("-", "_")


def split_names(text: str, flag: str) -> tuple[str, ...]:
    """A comma-separated option value as names; an empty or a repeated name is refused.

    Parameters
    ----------
    text : str
        The value as given.
    flag : str
        The option, for the message.

    Returns
    -------
    tuple of str
        The names, stripped.

    Raises
    ------
    OptionValueError
        An empty or a repeated name (a usage error).
    """
    items = tuple(t.strip() for t in text.split(","))
    if not all(items):
        raise OptionValueError(f"{flag} {text}: empty name in the comma-separated list")
    repeated = sorted({t for t in items if items.count(t) > 1})
    if repeated:
        raise OptionValueError(f"{flag}: {', '.join(repeated)} given more than once")
    return items


def _comma_list(kind: str, flag: str) -> Callable[[str], tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        if kind != NUMS:
            return split_names(text, flag)
        items = [t.strip() for t in text.split(",")]  # numbers may repeat (equal weights)
        try:
            return tuple(float(t) for t in items)
        except ValueError:
            raise OptionValueError(f"{flag} {text}: not a comma-separated list of numbers") from None

    parse.__name__ = "comma-separated list"
    return parse


def add_options(
    parser: argparse.ArgumentParser, cls: type, *, exclude: Sequence[str] = (), defaults: dict[str, Any] | None = None
) -> None:
    """Add an option per field of ``cls`` that has a flag: its help text, its kind's type,
    its choices and its default (named in the help; the option's own default is None, so that
    :func:`given` returns only what the user set).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    cls : type
        A config dataclass.
    exclude : sequence of str
        Fields not to add (the command sets them otherwise).
    defaults : dict, optional
        Defaults shown in the help instead of the field's (a command's own, e.g. its
        sampler settings).
    """
    kind_of = kinds(cls)
    for f, meta in _settings(cls):
        flag = _flag(f, meta)
        if flag is None or f.name in exclude:
            continue
        kind = kind_of[f.name]
        default = _default_words((defaults or {}).get(f.name, _default(f)))
        text = cli_text(meta["help"]) + (f" (default {default})" if default else "")
        kw: dict[str, Any] = {"dest": _dest(flag), "default": None, "help": text}
        if kind == BOOL:
            parser.add_argument(flag, action="store_true", **kw)
            continue
        kw["type"] = {INT: int, NUM: float, STR: str}.get(kind) or _comma_list(kind, flag)
        if meta["choices"]:
            kw["choices"] = list(meta["choices"])
        else:
            kw["metavar"] = meta["metavar"] or {INT: "N", NUM: "X", STR: "VALUE"}.get(kind, "A,B")
        parser.add_argument(flag, **kw)


def cli_text(text: str) -> str:
    """A help text as the command line prints it: no final full stop, no reST markup, a
    lower-case start (unless the first word is a name such as ``NUTS``).

    Parameters
    ----------
    text : str
        A :func:`setting` help text.

    Returns
    -------
    str
        The option's help.
    """
    text = text.replace("``", "").removesuffix(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text


def given(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``cls`` the user gave (not None; a flag only when set), as the
    config's keyword arguments.

    Parameters
    ----------
    cls : type
        A config dataclass.
    args : argparse.Namespace
        The parsed command line (:func:`add_options`' options).

    Returns
    -------
    dict
        ``{field: value}``.
    """
    out = {}
    for f, meta in _settings(cls):
        flag = _flag(f, meta)
        if flag is None:
            continue
        value = getattr(args, _dest(flag), None)
        if value is not None and value is not False:
            out[f.name] = value
    return out


def spec_keys(cls: type) -> dict[str, str]:
    """The ``[model]`` keys a spec of the analysis accepts and their kinds.

    Parameters
    ----------
    cls : type
        A config dataclass.

    Returns
    -------
    dict
        ``{key: kind}``.
    """
    kind_of = kinds(cls)
    return {meta["spec"] or f.name: kind_of[f.name] for f, meta in _settings(cls) if meta["spec"] is not None}


def spec_choices(cls: type) -> dict[str, tuple[str, ...]]:
    """The ``[model]`` keys of ``cls`` with a fixed set of values, and those values.

    Parameters
    ----------
    cls : type
        A config dataclass.

    Returns
    -------
    dict
        ``{key: choices}``.
    """
    return {
        meta["spec"] or f.name: meta["choices"]
        for f, meta in _settings(cls)
        if meta["spec"] is not None and meta["choices"]
    }


def help_of(cls: type, name: str) -> str:
    """The help text of one field of ``cls`` as the command line prints it (for an option a
    command declares itself).

    Parameters
    ----------
    cls : type
        A config dataclass.
    name : str
        The field.

    Returns
    -------
    str
        Its :func:`setting` help.
    """
    return cli_text(str(next(f for f in dataclasses.fields(cls) if f.name == name).metadata["help"]))


def _in_range(value: Any, check: str) -> bool:
    import math

    values = list(value) if isinstance(value, tuple | list) else [value]
    if check == "count":
        return all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return False
    if check == "positive":
        return all(v > 0 for v in values)
    if check == "non-negative":
        return all(v >= 0 for v in values)
    return True


def problems(config: Any) -> list[str]:
    """Every declared field of ``config`` outside the range its :func:`setting` ``check``
    names, each named as the spec key (the CLI option's name with underscores).

    Parameters
    ----------
    config : dataclass instance
        A config declared with :func:`setting`.

    Returns
    -------
    list of str
        One message per field out of range (empty when all are in range).
    """
    out = []
    for f, meta in _settings(type(config)):
        check, value = meta.get("check"), getattr(config, f.name)
        if check is not None and value is not None and not _in_range(value, check):
            name = meta["spec"] or (meta["flag"] or "").lstrip("-").replace("-", "_") or f.name
            out.append(f"{name} must be {CHECKS[check]}, got {value!r}")
    return out


def check(config: Any, what: str, *parts: Any) -> None:
    """Raise ValueError naming every declared field of ``config`` (and of its ``parts``)
    outside its range (:func:`problems`): a config's ``validate()``.

    Parameters
    ----------
    config : dataclass instance
        A config declared with :func:`setting`.
    what : str
        The analysis, for the message ("invalid <what> configuration: ...").
    *parts : dataclass instance
        Configs it holds, checked with it.

    Raises
    ------
    ValueError
        When any field is out of range.
    """
    found = [p for c in (config, *parts) for p in problems(c)]
    if found:
        raise ValueError(f"invalid {what} configuration: " + "; ".join(found))
