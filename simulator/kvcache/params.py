"""Policy specs on the command line: ``name:key=value,key=value`` parsed and validated per policy.

A policy's parameters are the keyword-only arguments of its constructor after ``rng`` (see
``EvictionPolicy``); their types come from the annotations: ``int``, ``float``, ``bool``
(``true``/``false``/``1``/``0``), ``str`` or a ``Literal`` of strings (the allowed values),
optionally ``| None``. So a new policy parameter is usable from the CLI with no registration.

``--algo`` lists specs separated by commas; a comma-separated item with ``=`` and no ``:``
continues the previous spec's parameters, so ``a:k=1,j=2,b`` is two specs, ``a`` with two
parameters and ``b`` without. Every error is one ``InputError`` line naming the spec, the key
and what was expected (the CLI exits 2); values are also checked by building the policy once,
so a range error (``n_sample=0``) is caught before a trace is read.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from simulator.kvcache.policies import POLICIES, make_policy
from simulator.kvcache.policies.base import EvictionPolicy
from slo.inputfile import InputError

__all__ = ["ParamSpec", "PolicySpec", "parse_policy_specs", "policy_params"]

_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One constructor parameter of a policy: its name, value type and default."""

    name: str
    kind: type
    """``int``, ``float``, ``bool`` or ``str``."""
    default: object
    choices: tuple[str, ...] = ()
    """Allowed values of a ``Literal`` parameter (empty = any value of ``kind``)."""

    def describe(self) -> str:
        """``name=<int, default 8>`` or ``name=<micro|drain, default micro>``."""
        what = "|".join(self.choices) if self.choices else self.kind.__name__
        return f"{self.name}=<{what}, default {self.default}>"

    def parse(self, text: str, where: str) -> object:
        """``text`` as this parameter's type; ``InputError`` naming ``where`` otherwise."""
        if self.choices:
            if text not in self.choices:
                raise InputError(f"{where}: expected one of {', '.join(self.choices)}")
            return text
        if self.kind is bool:
            if text.lower() not in _TRUE:
                raise InputError(f"{where}: expected true or false")
            return _TRUE[text.lower()]
        try:
            return self.kind(text)
        except ValueError:
            raise InputError(f"{where}: expected a value of type {self.kind.__name__}") from None


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy name and the parameters given for it (typed values, in the order given)."""

    name: str
    params: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        """How results name the run: ``name`` or ``name:key=value,...`` as given."""
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_show(v)}" for k, v in self.params)

    def kwargs(self) -> dict[str, Any]:
        """The parameters as constructor keyword arguments."""
        return dict(self.params)


def _show(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _unwrap(annotation: Any) -> tuple[type, tuple[str, ...]]:
    """(value type, Literal choices) of a parameter annotation; ``X | None`` counts as ``X``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    if get_origin(annotation) is Literal:
        choices = tuple(str(a) for a in get_args(annotation))
        return str, choices
    if annotation in (int, float, bool, str):
        return annotation, ()
    raise TypeError(f"unsupported policy parameter annotation {annotation!r}")


@cache
def policy_params(cls: type[EvictionPolicy]) -> Mapping[str, ParamSpec]:
    """The parameters a policy's constructor accepts, by name (empty for most policies)."""
    hints = get_type_hints(cls.__init__)
    out: dict[str, ParamSpec] = {}
    for param in inspect.signature(cls.__init__).parameters.values():
        if param.kind is not param.KEYWORD_ONLY or param.name == "rng":
            continue
        kind, choices = _unwrap(hints[param.name])
        out[param.name] = ParamSpec(param.name, kind, param.default, choices)
    return types.MappingProxyType(out)


def _items(text: str) -> list[tuple[str, list[str]]]:
    """Split ``--algo`` text into (spec head, its ``key=value`` items)."""
    specs: list[tuple[str, list[str]]] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" in item and ":" not in item:
            if not specs:
                raise InputError(f"--algo {item!r}: a parameter needs a policy, e.g. lru:{item}")
            specs[-1][1].append(item)
            continue
        name, _, first = item.partition(":")
        specs.append((name.strip(), [first.strip()] if first.strip() else []))
    return specs


def parse_policy_specs(text: str, option: str = "--algo") -> list[PolicySpec]:
    """Parse ``option``'s value into validated specs (duplicates dropped, order kept).

    Raises ``InputError`` (one line) for an unknown policy, an unknown key (listing the
    policy's parameters), a malformed item or a value of the wrong type or range.
    """
    specs: list[PolicySpec] = []
    for name, items in _items(text) or [("", [])]:
        if name not in POLICIES:
            raise InputError(f"{option} {name!r}: unknown policy; known: {', '.join(POLICIES)}")
        known = policy_params(POLICIES[name])
        params: dict[str, object] = {}
        for item in items:
            key, eq, value = (part.strip() for part in item.partition("="))
            where = f"{option} {name}:{item}"
            if not eq or not key or not value:
                raise InputError(f"{where}: expected key=value")
            if key not in known:
                accepted = ", ".join(p.describe() for p in known.values()) or "none"
                raise InputError(f"{where}: unknown parameter {key!r}; {name} takes {accepted}")
            params[key] = known[key].parse(value, where)
        spec = PolicySpec(name, tuple(params.items()))
        try:  # the policy's own range checks, before any trace is read
            make_policy(name, 64, **spec.kwargs())
        except ValueError as err:
            raise InputError(f"{option} {spec.label}: {err}") from None
        if spec not in specs:
            specs.append(spec)
    return specs
