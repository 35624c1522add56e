"""JAAS login-module text as Kafka's ``sasl.jaas.config`` holds it.

``<LoginModuleClass> <flag> [key=value ...];`` — values are bare words or double-quoted strings
(backslash escapes the next character); the flag is required, requisite, sufficient or
optional. Kafka takes exactly one module from a ``sasl.jaas.config`` value, and so do we.
"""

from dataclasses import dataclass, field
from typing import Final

PLAIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS: Final = frozenset({"required", "requisite", "sufficient", "optional"})


class JaasError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, was quoted); ``=`` and ``;`` are tokens of their own; comments are skipped."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError("unterminated /* comment")
            i = end + 2
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c == '"':
            buf: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise JaasError("unterminated quoted value")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            out.append(("".join(buf), True))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append((text[start:i], False))
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    toks = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(toks):
        name, quoted = toks[i]
        if quoted or name in "=;":
            raise JaasError(f"expected a login module class name, found {name!r}")
        if i + 1 >= len(toks):
            raise JaasError(f"login module {name} has no control flag")
        flag = toks[i + 1][0].lower()
        if flag not in _FLAGS:
            raise JaasError(
                f"invalid control flag {toks[i + 1][0]!r} for {name} "
                "(expected required, requisite, sufficient or optional)"
            )
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(toks):
                raise JaasError(f"login module {name} is not terminated by ';'")
            key, kq = toks[i]
            if key == ";" and not kq:
                i += 1
                break
            if i + 2 >= len(toks) or toks[i + 1] != ("=", False):
                raise JaasError(f"expected key=value in the options of {name}, found {key!r}")
            value, vq = toks[i + 2]
            if not vq and value in "=;":
                raise JaasError(f"option {key} of {name} has no value")
            options[key] = value
            i += 3
        modules.append(LoginModule(name, flag, options))
    if not modules:
        raise JaasError("no login module")
    return modules


def single_module(text: str) -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` value."""
    modules = parse_jaas(text)
    if len(modules) != 1:
        raise JaasError(f"must contain exactly one login module, found {len(modules)}")
    return modules[0]


def plain_users(module: LoginModule) -> dict[str, str]:
    """PlainLoginModule's server-side ``user_<name>="<password>"`` entries."""
    return {k[5:]: v for k, v in module.options.items() if k.startswith("user_") and len(k) > 5}
