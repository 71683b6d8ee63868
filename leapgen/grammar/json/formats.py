"""String ``format`` values as byte-level IR (the text between the quotes).

Every format here is ASCII text, matched in its canonical JSON spelling (see
:mod:`.strings`: raw, except ``\\"`` and ``\\\\`` in a quoted email
local part; spellings such as ``\\u0040`` for ``@`` are not accepted).

=============  ================================================================
format         accepted text
=============  ================================================================
``date``       RFC 3339 section 5.6 ``full-date``: ``YYYY-MM-DD``, month 01-12,
               day valid for its month, 29 February only in Gregorian leap
               years (years 0000-9999; ``0000`` counts as a leap year).
``time``       RFC 3339 ``full-time``: ``HH:MM:SS`` (hour 00-23, minute and
               second 00-59), optional fraction ``.d+``, then ``Z``/``z`` or
               ``+HH:MM``/``-HH:MM``. The leap second ``23:59:60`` is accepted
               with offset ``Z``/``+00:00``/``-00:00`` only (a leap second at
               another local time with a matching offset is rejected).
``date-time``  ``full-date`` ``T``/``t`` ``full-time``.
``email``      RFC 5321 ``Mailbox`` subset: a dot-atom local part
               (``atext`` = letters, digits and ``!#$%&'*+/=?^_`{|}~-``)
               or a quoted local part (printable ASCII, ``\\`` pairs),
               ``@``, then a domain of one or more dot-separated labels
               (letters, digits, inner hyphens; label and total lengths not
               checked) or an address literal ``[1.2.3.4]`` /
               ``[IPv6:...]``. No comments, no internationalized addresses.
``uuid``       RFC 9562: ``8-4-4-4-12`` hex digits, either case, any version.
``uri``        RFC 3986 section 3 ``URI``: ``scheme ":" hier-part ["?" query]
               ["#" fragment]``, with ``//authority`` (userinfo, IP-literal
               incl. IPv6 and IPvFuture, IPv4, reg-name, port), all path
               forms, and ``%XX`` percent-encoding.
``ipv6``       RFC 4291 text form (RFC 3986 ``IPv6address``), embedded IPv4
               allowed, no zone id.
``ipv4``       dotted quad, each part 0-255 without leading zeros.
``duration``   RFC 3339 Appendix A ``duration`` (ISO 8601): ``P1Y2M3DT4H5M6S``,
               ``P2W``, ``PT1M``; every unit after the first is optional
               but the order is fixed; at least one unit.
``hostname``   RFC 1123 names: dot-separated labels of 1-63 letters, digits
               and inner hyphens, none with ``--`` at positions 3-4 (so no
               ``xn--`` A-labels: their Punycode cannot be checked here).
               The 253-character total is kept by a stricter rule (a DFA
               counting both would need ~24k states): at most 3 labels of
               up to 63 characters, 6 of 41, 12 of 20 or 25 of 9.
``uri-         RFC 3986 ``URI-reference``: a ``uri`` or a relative reference.
reference``
``iri``,       RFC 3987: as ``uri``/``uri-reference`` with the ``ucschar``
``iri-         (and in queries ``iprivate``) code points allowed raw.
reference``
``json-        RFC 6901: ``("/" (char except "/", "~" | "~0" | "~1")*)*``.
pointer``
``relative-    a non-negative integer then ``#`` or a JSON pointer.
json-pointer``
``uri-         RFC 6570 level 4 templates: literals and ``{op? var[:n|*],...}``.
template``
=============  ================================================================

:data:`STANDARD_FORMATS` lists every format the 2020-12 specification
defines; a missing one (``idn-email``, ``idn-hostname``, ``regex``) is
ignored with a warning when ``strict_mode=False``, while other names are
annotations and are ignored silently (SchemaError with ``strict_mode=True``).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import ir
from ..ir import Node
from .numbers import DIGIT, uint_range


def _d2(lo: int, hi: int) -> Node:
    """Two-digit zero-padded numbers in ``[lo, hi]``."""
    return ir.alt(*(ir.lit(f"{v:02d}") for v in range(lo, hi + 1)))


def _cls(chars: str = "", ranges=()) -> Node:
    rs = [(ord(c), ord(c)) for c in chars]
    rs.extend((ord(a), ord(b)) for a, b in ranges)
    return ir.byteset(rs)


ALPHA = _cls(ranges=[("a", "z"), ("A", "Z")])
ALNUM = _cls(ranges=[("a", "z"), ("A", "Z"), ("0", "9")])
HEXDIG = _cls(ranges=[("a", "f"), ("A", "F"), ("0", "9")])


def date() -> Node:
    year = ir.repeat(DIGIT, 4, 4)
    # Years divisible by 4 that are leap years in the Gregorian calendar.
    leap = ir.alt(
        ir.seq(ir.repeat(DIGIT, 2, 2), ir.alt(ir.seq(_cls("02468"), _cls("48")), ir.seq(_cls("13579"), _cls("26")),
                                                ir.seq(_cls("2468"), ir.lit("0")))),
        ir.seq(ir.alt(ir.seq(_cls("02468"), _cls("048")), ir.seq(_cls("13579"), _cls("26"))), ir.lit("00")))
    long_m = ir.alt(*(ir.lit(m) for m in ("01", "03", "05", "07", "08", "10", "12")))
    short_m = ir.alt(*(ir.lit(m) for m in ("04", "06", "09", "11")))
    month_day = ir.alt(ir.seq(long_m, ir.lit("-"), _d2(1, 31)),
                       ir.seq(short_m, ir.lit("-"), _d2(1, 30)),
                       ir.seq(ir.lit("02-"), _d2(1, 28)))
    return ir.alt(ir.seq(year, ir.lit("-"), month_day), ir.seq(leap, ir.lit("-02-29")))


def time() -> Node:
    frac = ir.opt(ir.seq(ir.lit("."), ir.plus(DIGIT)))
    offset = ir.alt(_cls("Zz"), ir.seq(_cls("+-"), _d2(0, 23), ir.lit(":"), _d2(0, 59)))
    utc = ir.alt(_cls("Zz"), ir.seq(_cls("+-"), ir.lit("00:00")))
    normal = ir.seq(_d2(0, 23), ir.lit(":"), _d2(0, 59), ir.lit(":"), _d2(0, 59), frac, offset)
    leap = ir.seq(ir.lit("23:59:60"), frac, utc)
    return ir.alt(normal, leap)


def date_time() -> Node:
    return ir.seq(date(), _cls("Tt"), time())


def ipv4() -> Node:
    octet = uint_range(0, 255)
    return ir.seq(octet, ir.repeat(ir.seq(ir.lit("."), octet), 3, 3))


def email() -> Node:
    atext = _cls("!#$%&'*+/=?^_`{|}~-", [("a", "z"), ("A", "Z"), ("0", "9")])
    atom = ir.plus(atext)
    dot_atom = ir.join(atom, ir.lit("."))
    qtext = ir.byteset([(32, 33), (35, 91), (93, 126)])
    quoted_pair = ir.seq(ir.lit("\\"), ir.byteset([(32, 126)]))
    local = ir.alt(dot_atom, ir.seq(ir.lit('"'), ir.star(ir.alt(qtext, quoted_pair)), ir.lit('"')))
    label = ir.seq(ALNUM, ir.opt(ir.seq(ir.star(ir.alt(ALNUM, ir.lit("-"))), ALNUM)))
    domain = ir.alt(ir.join(label, ir.lit(".")),
                    ir.seq(ir.lit("["), ir.alt(ipv4(), ir.seq(ir.lit("IPv6:"), _ipv6())), ir.lit("]")))
    return ir.seq(local, ir.lit("@"), domain)


def uuid() -> Node:
    def h(n):
        return ir.repeat(HEXDIG, n, n)
    dash = ir.lit("-")
    return ir.seq(h(8), dash, h(4), dash, h(4), dash, h(4), dash, h(12))


def _ipv6() -> Node:
    h16 = ir.repeat(HEXDIG, 1, 4)
    ls32 = ir.alt(ir.seq(h16, ir.lit(":"), h16), ipv4())
    c = ir.lit(":")

    def h16c(n):
        return ir.repeat(ir.seq(h16, c), n, n)

    def pre(n):  # [ *n( h16 ":" ) h16 ]
        if n < 0:
            return ir.EMPTY
        return ir.opt(ir.seq(ir.repeat(ir.seq(h16, c), 0, n), h16))
    dc = ir.lit("::")
    return ir.alt(
        ir.seq(h16c(6), ls32),
        ir.seq(dc, h16c(5), ls32),
        ir.seq(ir.opt(h16), dc, h16c(4), ls32),
        ir.seq(pre(1), dc, h16c(3), ls32),
        ir.seq(pre(2), dc, h16c(2), ls32),
        ir.seq(pre(3), dc, h16, c, ls32),
        ir.seq(pre(4), dc, ls32),
        ir.seq(pre(5), dc, h16),
        ir.seq(pre(6), dc),
    )


UCSCHAR = ((0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF), (0x10000, 0x1FFFD), (0x20000, 0x2FFFD),
           (0x30000, 0x3FFFD), (0x40000, 0x4FFFD), (0x50000, 0x5FFFD), (0x60000, 0x6FFFD), (0x70000, 0x7FFFD),
           (0x80000, 0x8FFFD), (0x90000, 0x9FFFD), (0xA0000, 0xAFFFD), (0xB0000, 0xBFFFD), (0xC0000, 0xCFFFD),
           (0xD0000, 0xDFFFD), (0xE1000, 0xEFFFD))
IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))


def uri() -> Node:
    return _uri(reference=False, iri=False)


def uri_reference() -> Node:
    return _uri(reference=True, iri=False)


def iri() -> Node:
    return _uri(reference=False, iri=True)


def iri_reference() -> Node:
    return _uri(reference=True, iri=True)


def _uri(*, reference: bool, iri: bool) -> Node:
    """RFC 3986 ``URI`` (``reference``: ``URI-reference``); ``iri``: RFC 3987."""
    unreserved = _cls("-._~", [("a", "z"), ("A", "Z"), ("0", "9")])
    if iri:
        unreserved = ir.alt(unreserved, ir.charset(UCSCHAR))
    sub_delims = _cls("!$&'()*+,;=")
    pct = ir.seq(ir.lit("%"), HEXDIG, HEXDIG)
    pchar = ir.alt(unreserved, pct, sub_delims, _cls(":@"))
    scheme = ir.seq(ALPHA, ir.star(_cls("+-.", [("a", "z"), ("A", "Z"), ("0", "9")])))
    userinfo = ir.star(ir.alt(unreserved, pct, sub_delims, ir.lit(":")))
    ipvfuture = ir.seq(_cls("vV"), ir.plus(HEXDIG), ir.lit("."), ir.plus(ir.alt(unreserved, sub_delims, ir.lit(":"))))
    ip_literal = ir.seq(ir.lit("["), ir.alt(_ipv6(), ipvfuture), ir.lit("]"))
    reg_name = ir.star(ir.alt(unreserved, pct, sub_delims))
    host = ir.alt(ip_literal, ipv4(), reg_name)
    authority = ir.seq(ir.opt(ir.seq(userinfo, ir.lit("@"))), host, ir.opt(ir.seq(ir.lit(":"), ir.star(DIGIT))))
    segment = ir.star(pchar)
    segment_nz = ir.plus(pchar)
    path_abempty = ir.star(ir.seq(ir.lit("/"), segment))
    path_absolute = ir.seq(ir.lit("/"), ir.opt(ir.seq(segment_nz, path_abempty)))
    path_rootless = ir.seq(segment_nz, path_abempty)
    hier = ir.alt(ir.seq(ir.lit("//"), authority, path_abempty), path_absolute, path_rootless, ir.EMPTY)
    qf = ir.star(ir.alt(pchar, _cls("/?")))
    query = ir.star(ir.alt(pchar, _cls("/?"), ir.charset(IPRIVATE))) if iri else qf
    tail = ir.seq(ir.opt(ir.seq(ir.lit("?"), query)), ir.opt(ir.seq(ir.lit("#"), qf)))
    absolute = ir.seq(scheme, ir.lit(":"), hier, tail)
    if not reference:
        return absolute
    segment_nz_nc = ir.plus(ir.alt(unreserved, pct, sub_delims, ir.lit("@")))
    path_noscheme = ir.seq(segment_nz_nc, path_abempty)
    relative = ir.seq(ir.alt(ir.seq(ir.lit("//"), authority, path_abempty), path_absolute, path_noscheme, ir.EMPTY),
                      tail)
    return ir.alt(absolute, relative)


def duration() -> Node:
    def unit(letter):
        return ir.seq(ir.plus(DIGIT), ir.lit(letter))
    second = unit("S")
    minute = ir.seq(unit("M"), ir.opt(second))
    hour = ir.seq(unit("H"), ir.opt(minute))
    dur_time = ir.seq(ir.lit("T"), ir.alt(hour, minute, second))
    day = unit("D")
    month = ir.seq(unit("M"), ir.opt(day))
    year = ir.seq(unit("Y"), ir.opt(month))
    dur_date = ir.seq(ir.alt(day, month, year), ir.opt(dur_time))
    return ir.seq(ir.lit("P"), ir.alt(dur_date, dur_time, unit("W")))


HOSTNAME_TIERS = ((3, 63), (6, 41), (12, 20), (25, 9))
"""(most labels, longest label): each tier keeps a name within 253 characters."""


def hostname() -> Node:
    ldh = ir.alt(ALNUM, ir.lit("-"))
    reserved = ir.seq(ir.repeat(ldh, 2, 2), ir.lit("--"), ir.star(ldh))  # "--" at 3-4: xn-- and reserved

    def label(longest: int) -> Node:
        return ir.diff(ir.seq(ALNUM, ir.opt(ir.seq(ir.repeat(ldh, 0, longest - 2), ALNUM))), reserved)
    return ir.alt(*(ir.seq(label(n), ir.repeat(ir.seq(ir.lit("."), label(n)), 0, k - 1)) for k, n in HOSTNAME_TIERS))


def json_pointer() -> Node:
    unescaped = ir.charset([(0, 0x2E), (0x30, 0x7D), (0x7F, ir.MAX_UNICODE)])
    return ir.star(ir.seq(ir.lit("/"), ir.star(ir.alt(unescaped, ir.lit("~0"), ir.lit("~1")))))


def relative_json_pointer() -> Node:
    return ir.seq(uint_range(0, None), ir.alt(ir.lit("#"), json_pointer()))


def uri_template() -> Node:
    literal = ir.charset([(0x21, 0x21), (0x23, 0x24), (0x26, 0x26), (0x28, 0x3B), (0x3D, 0x3D), (0x3F, 0x5B),
                          (0x5D, 0x5D), (0x5F, 0x5F), (0x61, 0x7A), (0x7E, 0x7E), *UCSCHAR, *IPRIVATE])
    pct = ir.seq(ir.lit("%"), HEXDIG, HEXDIG)
    varchar = ir.alt(ALNUM, ir.lit("_"), pct)
    varname = ir.seq(varchar, ir.star(ir.seq(ir.opt(ir.lit(".")), varchar)))
    modifier = ir.opt(ir.alt(ir.seq(ir.lit(":"), _cls(ranges=[("1", "9")]), ir.repeat(DIGIT, 0, 3)), ir.lit("*")))
    varspec = ir.seq(varname, modifier)
    operator = ir.opt(_cls("+#./;?&=,!@|"))
    expression = ir.seq(ir.lit("{"), operator, ir.join(varspec, ir.lit(",")), ir.lit("}"))
    return ir.star(ir.alt(literal, pct, expression))


FORMATS: dict[str, Callable[[], Node]] = {
    "date": date,
    "time": time,
    "date-time": date_time,
    "email": email,
    "uuid": uuid,
    "uri": uri,
    "ipv4": ipv4,
    "ipv6": _ipv6,
    "duration": duration,
    "hostname": hostname,
    "uri-reference": uri_reference,
    "iri": iri,
    "iri-reference": iri_reference,
    "json-pointer": json_pointer,
    "relative-json-pointer": relative_json_pointer,
    "uri-template": uri_template,
}
"""Supported ``format`` names -> builder of the string-content IR."""

#: Formats compiled to a subset of the names they allow (``hostname``: no ``xn--`` A-labels, the
#: 253-character total by label tiers, see above). Their complement (``not``, a ``oneOf`` branch that
#: must fail) is then a superset: compiled with a warning.
NARROWED_FORMATS = frozenset({"hostname"})

STANDARD_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex"})
"""The formats JSON Schema 2020-12 defines (section 7.3 of the validation spec)."""
