"""Declared properties of recipe arms: what the trial tables do not carry (context length,
tool set, learning rate), written ``ARM:KEY=VALUE``, and the confounders a comparison must
match, written ``KEY`` or ``KEY=VALUE`` (``saturation compare --arm-attr/--match``, a
compare spec's ``arm_attrs``/``match``). Light: the CLI checks them before loading data;
the rule that uses them is ``models.sigmoid.confounding``."""

from __future__ import annotations


def parse_arm_properties(
    declared: list[str] | tuple[str, ...], match: list[str] | tuple[str, ...]
) -> tuple[dict[str, dict[str, str]], dict[str, str | None]]:
    """``ARM:KEY=VALUE`` declarations and ``KEY[=VALUE]`` confounders (the CLI's ``--arm-attr``
    and ``--match``, a spec's ``arm_attrs`` and ``match``) as :attr:`SigmoidConfig.arm_attrs`
    and :attr:`SigmoidConfig.match`; ValueError naming the first malformed one."""
    attrs: dict[str, dict[str, str]] = {}
    for item in declared:
        arm, sep, rest = item.partition(":")
        key, eq, value = rest.partition("=")
        if not (sep and eq and arm and key.strip() and value.strip()):
            raise ValueError(f"{item}: expected ARM:KEY=VALUE (e.g. t2yarn:context=81920)")
        attrs.setdefault(arm, {})[key.strip()] = value.strip()
    required: dict[str, str | None] = {}
    for item in match:
        key, eq, value = item.partition("=")
        if not key.strip() or (eq and not value.strip()):
            raise ValueError(f"{item}: expected KEY or KEY=VALUE (e.g. context=81920)")
        required[key.strip()] = value.strip() if eq else None
    return attrs, required
