"""``format`` as regular languages over the decoded string.

Each supported format is a regular expression (ECMAScript syntax, matched whole) written from its
RFC grammar.  Where the RFC's set is not regular or not small, the language here is a *subset* that
never admits an invalid string (the schema's promise matters more than the rare exotic value):

* ``date`` / ``date-time``: RFC 3339 ``full-date`` with the real number of days per month,
  29 February only in leap years, years 0001-9999; ``time``/``date-time`` need an offset (``Z`` or
  ``±hh:mm``), ``T``/``Z`` in either case; a leap second (``:60``) exactly where the time is
  23:59 UTC, for offsets of whole or half hours (``23:59:60Z``, ``15:59:60-08:00``; RFC 3339 5.7).
* ``duration``: RFC 3339 appendix A (``P1Y2M``, ``PT1H30M``, ``P2W``).
* ``email``: RFC 5321 ``Mailbox`` (dot-atom or quoted local part; a host name or an address
  literal ``[1.2.3.4]``/``[IPv6:...]``), ASCII only.
* ``hostname``: RFC 1123 labels of 1-63 characters (letters, digits, inner hyphens), at most 3
  labels of up to 63 characters or up to 8 labels of up to 30, so the name stays within 253;
  other hyphens anywhere inside a label (``w--ww.co----m``), but no label starting with ``xn--``
  (Punycode, which would need IDNA checks).
* ``ipv4`` (no leading zeros), ``ipv6`` (RFC 4291 text forms, no zone), ``uuid`` (8-4-4-4-12 hex),
  ``uri``/``uri-reference`` (RFC 3986, ASCII), ``json-pointer`` (RFC 6901),
  ``relative-json-pointer``.

Formats the JSON Schema specification defines but pda does not implement (``regex``, ``iri``,
``idn-*``, ``uri-template``) are refused as unsupported; unknown formats are annotations and
ignored, as the specification says.
"""

from __future__ import annotations

from functools import lru_cache

from pda.ir import Expr

from ..regex import regex_to_ir

__all__ = ["FORMATS", "KNOWN_UNSUPPORTED", "format_expr"]

_DEC = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = rf"{_DEC}(?:\.{_DEC}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{IPV4})"
IPV6 = (
    rf"(?:(?:{_H16}:){{6}}{_LS32}"
    rf"|::(?:{_H16}:){{5}}{_LS32}"
    rf"|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}"
    rf"|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    rf"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}"
    rf"|(?:(?:{_H16}:){{0,6}}{_H16})?::)"
)
_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP}-02-29)"
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_FRAC = r"(?:\.[0-9]+)?"


def _leap_seconds() -> str:
    """The times with a leap second (``:60``): exactly those that are 23:59 UTC, for the offsets
    of whole and half hours (``Z``, ``+05:30``, ``-08:00`` ...; a leap second with another offset
    is refused, which keeps the automaton small: 48 local times instead of 1440)."""
    alts = []
    for hour in range(24):
        for minute in (29, 59):
            local = hour * 60 + minute
            ahead = (local + 1) % 1440  # offset +HH:MM: local - offset = 23:59 (mod 24 h)
            behind = 1439 - local  # offset -HH:MM: local + offset = 23:59
            offsets = [rf"\+{ahead // 60:02d}:{ahead % 60:02d}", rf"-{behind // 60:02d}:{behind % 60:02d}"]
            if local == 1439:
                offsets.append("[Zz]")
            alts.append(rf"{hour:02d}:{minute:02d}:60{_FRAC}(?:{'|'.join(offsets)})")
    return "(?:" + "|".join(alts) + ")"


TIME = rf"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}|{_leap_seconds()})"
DATE_TIME = rf"{DATE}[Tt]{TIME}"
DURATION = (
    r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
    r"|[0-9]+W)"
)
_AN = "[A-Za-z0-9]"
_AH = "[A-Za-z0-9-]"


def _label(n: int) -> str:
    """An RFC 1123 label of 1..n letters, digits and hyphens, neither starting nor ending with a
    hyphen, and not starting with ``xn--`` (any case): such a label must be valid Punycode
    (RFC 5891), which is not checked here, so all of them are refused."""

    def first4(c4: str) -> str:  # four characters that do not spell xn--
        return (rf"(?:[A-WYZa-wyz0-9]{_AH}{_AH}{c4}|[Xx][A-MO-Za-mo-z0-9-]{_AH}{c4}|[Xx][Nn]{_AN}{c4}"
                rf"|[Xx][Nn]-{_AN})")

    return rf"(?:{_AN}(?:{_AH}?{_AN})?|{first4(_AN)}|{first4(_AH)}{_AH}{{0,{n - 5}}}{_AN})"


_LABEL63 = _label(63)
_LABEL30 = _label(30)
HOSTNAME = rf"(?:{_LABEL63}(?:\.{_LABEL63}){{0,2}}|(?:{_LABEL30}\.){{3,7}}{_LABEL30})"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LOCAL = rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|\"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*\")"
EMAIL = rf"{_LOCAL}@(?:{HOSTNAME}|\[{IPV4}\]|\[IPv6:{IPV6}\])"
UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_UNRES = r"A-Za-z0-9._~\-"
_SUB = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRES}{_SUB}:@]|{_PCT})"
_PCHAR_NC = rf"(?:[{_UNRES}{_SUB}@]|{_PCT})"
_AUTH = (
    rf"(?:(?:[{_UNRES}{_SUB}:]|{_PCT})*@)?"
    rf"(?:\[(?:{IPV6}|v[0-9A-Fa-f]+\.[{_UNRES}{_SUB}:]+)\]|(?:[{_UNRES}{_SUB}]|{_PCT})*)"
    r"(?::[0-9]*)?"
)
_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_ABSOLUTE = rf"/(?:{_PCHAR}+{_ABEMPTY})?"
_ROOTLESS = rf"{_PCHAR}+{_ABEMPTY}"
_NOSCHEME = rf"{_PCHAR_NC}+{_ABEMPTY}"
_QUERY = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
URI = rf"[A-Za-z][A-Za-z0-9+.\-]*:(?://{_AUTH}{_ABEMPTY}|{_ABSOLUTE}|{_ROOTLESS})?{_QUERY}"
RELATIVE_REF = rf"(?://{_AUTH}{_ABEMPTY}|{_ABSOLUTE}|{_NOSCHEME})?{_QUERY}"
JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
RELATIVE_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"

FORMATS: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "hostname": HOSTNAME,
    "host-name": HOSTNAME,
    "ipv4": IPV4,
    "ip-address": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": rf"(?:{URI}|{RELATIVE_REF})",
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}

KNOWN_UNSUPPORTED = frozenset({
    "regex", "iri", "iri-reference", "idn-email", "idn-hostname", "uri-template", "color", "utc-millisec",
})


@lru_cache(maxsize=None)
def format_expr(name: str) -> Expr:
    """The decoded-string language of a supported format (raises KeyError for others)."""
    return regex_to_ir(FORMATS[name], dialect="ecmascript", search=False)
