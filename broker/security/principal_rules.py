"""``ssl.principal.mapping.rules``: how a TLS certificate's subject DN becomes a principal name.

A comma-separated list, tried in order until one matches the whole DN:

- ``DEFAULT``: the DN as it is (RFC 2253, e.g. ``CN=node1,OU=kafka,O=Example,C=US``);
- ``RULE:<regex>/<replacement>/[L|U]``: when ``<regex>`` matches the whole DN, the DN with every
  match replaced (``$1`` ... name the groups, as in Java), then lower- or upper-cased. A ``/``
  inside the regex or the replacement is written ``\\/``.

A DN that no rule matches has no principal (Kafka fails the connection's authentication).
"""

import re
from dataclasses import dataclass
from typing import Final

_RULE: Final = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/"
    r"(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))\s*(?:,|$)"
)
_JAVA_GROUP: Final = re.compile(r"\$(\d+)|\\(.)")


class MappingRulesError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""  # in Python's re.sub syntax
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(self.replacement, dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _python_replacement(java: str) -> str:
    """``$1`` -> ``\\g<1>``; ``\\x`` -> a literal ``x`` (Java's Matcher.replaceAll escapes)."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return f"\\g<{m.group(1)}>"
        return m.group(2).replace("\\", "\\\\")

    return _JAVA_GROUP.sub(one, java)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``ssl.principal.mapping.rules``; MappingRulesError says what is wrong."""
    text = text.strip()
    if not text:
        return (Rule(None),)
    rules: list[Rule] = []
    pos = 0
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise MappingRulesError(
                f"invalid rule at {text[pos:]!r} (expected DEFAULT or RULE:regex/replacement/[LU])"
            )
        pos = m.end()
        if m.group("default"):
            rules.append(Rule(None))
            continue
        raw = m.group("pattern").replace("\\/", "/")
        try:
            pattern = re.compile(raw)
        except re.error as e:
            raise MappingRulesError(f"invalid regex {raw!r}: {e}") from None
        replacement = _python_replacement(m.group("replacement").replace("\\/", "/"))
        rules.append(Rule(pattern, replacement, m.group("case")))
    return tuple(rules)


DEFAULT_RULES: Final = (Rule(None),)


def map_dn(rules: tuple[Rule, ...], dn: str) -> str | None:
    """The principal name for ``dn``, or None when no rule matches it."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    return None
