"""Canonical index arithmetic: range-aware simplification of floordiv and mod.

Index expressions are sympy over iteration variables (``x``, ``r``: ``0 <= v < upper[v]``)
and size symbols (``s0``, ...: positive integers, never replaced by a value).  View
folding splits a flat index into digits with ``floordiv``/``mod``; ``simplify`` undoes
the splits an access does not need, so that two accesses of the same element are
the same expression and a contiguous access is ``x`` (or ``r + N*x``).

Rules (applied bottom-up, then digits merged, until nothing changes):
  * whole multiples leave:   floordiv(q*k + b, k) -> q + floordiv(b, k),  mod(q*k + b, k) -> mod(b, k)
  * small terms drop:        floordiv(g*B + b, k) -> floordiv(B, k/g),  mod(g*B + b, k) -> g*mod(B, k/g) + b
                             when g divides k and 0 <= b < g (g may be 1: floordiv(b, k) -> 0, mod(b, k) -> b)
  * nesting:                 floordiv(floordiv(e, a), b) -> floordiv(e, a*b),
                             floordiv(mod(e, m), a) -> mod(floordiv(e, a), m/a) when a divides m,
                             mod(mod(e, m), n) -> mod(e, n) when n divides m
  * digits merge:            c*mod(floordiv(e, a), m) + c*m*mod(floordiv(e, a*m), n) -> c*mod(floordiv(e, a), m*n)
                             (with ``floordiv(e, 1) = e`` and an absent mod as an unbounded digit:
                             a*floordiv(e, a) + mod(e, a) -> e)
The canonical form of a digit is ``mod(floordiv(e, a), m)``.  Range facts come from
interval bounds that are themselves expressions over the size symbols
(``x < s0*s1`` gives ``floordiv(x, s1) <= (s0*s1 - 1)/s1 < s0``); a fact sympy cannot
prove is treated as false, so a rule that needs it does not fire.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import sympy

from fusec.base.shapes import FloorDiv, Mod, is_integer_poly, quotient

Upper = Mapping[sympy.Symbol, sympy.Expr]  # v -> exclusive upper bound: 0 <= v < upper[v]
_ROUNDS = 8


def simplify(expr: sympy.Basic, upper: Upper | None = None) -> sympy.Expr:
    """The canonical form of an index expression with ``0 <= v < upper[v]`` for each iteration variable ``v``."""
    return _simplify(sympy.sympify(expr), _key(upper))


def _key(upper: Upper | None) -> tuple:
    return tuple(sorted(((v, sympy.sympify(b)) for v, b in (upper or {}).items()), key=lambda kv: kv[0].name))


@functools.lru_cache(maxsize=8192)
def _simplify(e: sympy.Expr, upper_items: tuple) -> sympy.Expr:
    ranges = _Ranges(dict(upper_items))
    e = sympy.expand(e.xreplace({v: 0 for v, b in upper_items if b == 1}))  # a one-point domain: v is 0
    for _ in range(_ROUNDS):
        new = sympy.expand(merge_digits(sympy.expand(ranges.fold(e)), ranges))
        if new == e:
            break
        e = new
    return e


def bounds(e: sympy.Basic, upper: Upper | None = None) -> tuple[sympy.Expr, sympy.Expr]:
    """Inclusive (lo, hi) of ``e``: expressions over the size symbols, or -oo/oo where unknown."""
    return _Ranges(dict(_key(upper))).bounds(sympy.sympify(e))


def proves_below(a: sympy.Basic, b: sympy.Basic, upper: Upper | None = None) -> bool:
    """True when ``0 <= a < b`` is proved for every value of the symbols."""
    return _Ranges(dict(_key(upper))).below(sympy.sympify(a), sympy.sympify(b))


# ---------------------------------------------------------------- proofs


def nonnegative(e: sympy.Expr) -> bool:
    """Whether sympy proves ``e >= 0`` (size symbols are positive integers)."""
    return _proves(e, strict=False)


def positive(e: sympy.Expr) -> bool:
    """Whether sympy proves ``e > 0``."""
    return _proves(e, strict=True)


@functools.lru_cache(maxsize=16384)
def _proves(e: sympy.Expr, strict: bool) -> bool:
    if e.has(sympy.nan):
        return False
    if e.is_number:
        return bool(e > 0) if strict else bool(e >= 0)
    decided = _shifted_sign(e, strict)
    if decided is not None:
        return decided
    for form in (lambda t: t, sympy.expand, lambda t: sympy.cancel(sympy.together(t)), sympy.factor):
        if (form(e).is_positive if strict else form(e).is_nonnegative):
            return True
    return False


def _shifted_sign(e: sympy.Expr, strict: bool) -> bool | None:
    """Whether ``e > 0`` (``e >= 0``) is proved for a polynomial, or a ratio of polynomials, over size symbols
    (positive integers) and iteration variables (nonnegative): with each size symbol written ``1 + t``, a polynomial
    whose coefficients are all nonnegative is nonnegative, and positive when its constant term is too.  None where
    ``e`` has another form (floordiv, mod, a symbol of unknown sign): sympy's assumptions decide those.

    Why: sympy's assumption queries took ~17 ms a question under symbolic sizes (a quarter of a dynamic compile's
    pipeline), most of it failing on each of four rewritten forms; this answers the same questions in microseconds."""
    if e.has(FloorDiv, sympy.Mod):
        return None
    shift = {}
    for s in e.free_symbols:
        if not s.is_integer:
            return None
        if s.is_positive:
            shift[s] = s + 1
        elif not s.is_nonnegative:
            return None
    numerator, denominator = e.as_numer_denom()
    den = _shifted_coefficients(denominator, shift)
    if den is None or not (den[0] and den[1]):  # a denominator proved positive, or no decision here
        return None
    num = _shifted_coefficients(numerator, shift)
    if num is None:
        return None
    return num[0] and (num[1] or not strict)


def _shifted_coefficients(p: sympy.Expr, shift: dict) -> tuple[bool, bool] | None:
    """(every coefficient of ``p`` with the size symbols shifted is >= 0, its constant term is > 0); None where
    ``p`` is not a polynomial."""
    constant = sympy.Integer(0)
    nonnegative = True
    for term in sympy.Add.make_args(sympy.expand(p.xreplace(shift))):
        coefficient, monomial = term.as_coeff_Mul()
        if not coefficient.is_Rational:
            return None
        if monomial is sympy.S.One:
            constant += coefficient
            continue
        for factor in sympy.Mul.make_args(monomial):
            base, exponent = factor.as_base_exp()
            if not (base.is_Symbol and exponent.is_Integer and exponent > 0):
                return None
        nonnegative = nonnegative and coefficient >= 0
    return nonnegative and constant >= 0, constant > 0


def divides(d: sympy.Expr, e: sympy.Expr) -> bool:
    """Whether ``e / d`` is an integer polynomial (d a positive size expression)."""
    if d == 1:
        return True
    if d.is_Integer and e.is_Integer:
        return int(e) % int(d) == 0
    return is_integer_poly(quotient(e, d))




def _is_size(e: sympy.Expr, upper: Upper) -> bool:
    """A positive expression of size symbols only (a divisor, a coefficient)."""
    return not (e.free_symbols & set(upper)) and not e.has(FloorDiv, sympy.Mod) and nonnegative(e - 1)


# ---------------------------------------------------------------- folding


class _Ranges:
    """Bounds and the folding rules under one set of iteration-variable bounds."""

    def __init__(self, upper: dict[sympy.Symbol, sympy.Expr]):
        self.upper = upper
        self._folded: dict[sympy.Expr, sympy.Expr] = {}

    def bounds(self, e: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
        inf = sympy.oo
        if e.is_Integer:
            return e, e
        if e.is_Symbol:
            if e in self.upper:
                return sympy.Integer(0), self.upper[e] - 1
            return (sympy.Integer(1) if e.is_positive else sympy.Integer(0) if e.is_nonnegative else -inf), e
        if isinstance(e, sympy.Add):
            parts = [self.bounds(a) for a in e.args]
            return sympy.Add(*[p[0] for p in parts]), sympy.Add(*[p[1] for p in parts])
        if isinstance(e, sympy.Mul):
            coeff, rest = e.as_coeff_Mul()
            parts = [self.bounds(f) for f in sympy.Mul.make_args(rest)]
            if not all(nonnegative(lo) for lo, _ in parts):
                return -inf, inf
            lo, hi = sympy.Mul(*[p[0] for p in parts]), sympy.Mul(*[p[1] for p in parts])
            return (coeff * lo, coeff * hi) if coeff >= 0 else (coeff * hi, coeff * lo)
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
            lo, hi = self.bounds(e.base)
            return (lo**e.exp, hi**e.exp) if nonnegative(lo) else (-inf, inf)
        if isinstance(e, FloorDiv):
            (lo, hi), d = self.bounds(e.args[0]), e.args[1]
            if not (_is_size(d, self.upper) and nonnegative(lo)):
                return -inf, inf
            if d.is_Integer and lo.is_Integer and hi.is_Integer:
                return lo // d, hi // d
            return sympy.Integer(0), hi / d
        if isinstance(e, sympy.Mod):
            (lo, hi), m = self.bounds(e.args[0]), e.args[1]
            if not _is_size(m, self.upper):
                return -inf, inf
            if nonnegative(lo) and positive(m - hi):
                return lo, hi
            return sympy.Integer(0), m - 1
        if isinstance(e, (sympy.Max, sympy.Min)):
            parts = [self.bounds(a) for a in e.args]
            return e.func(*[p[0] for p in parts]), e.func(*[p[1] for p in parts])
        return -inf, inf

    def below(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        lo, hi = self.bounds(a)
        # a is an integer: a <= hi < b proves a < b even for a fractional bound hi.
        return nonnegative(lo) and hi != sympy.oo and positive(b - hi)

    def fold(self, e: sympy.Expr) -> sympy.Expr:
        if not e.args or e.is_number:
            return e
        done = self._folded.get(e)
        if done is None:
            done = self._folded[e] = self._fold(e)
        return done

    def _fold(self, e: sympy.Expr) -> sympy.Expr:
        # Memoized in ``fold``: expanded index expressions repeat the same floordivs in many terms.
        args = [self.fold(a) for a in e.args]
        if isinstance(e, (FloorDiv, sympy.Mod)):  # digits merged inside too: views composed nest whole indices there
            dividend = sympy.expand(args[0])
            if isinstance(dividend, sympy.Add):
                dividend = sympy.expand(merge_digits(dividend, self))
            return self.floordiv(dividend, args[1]) if isinstance(e, FloorDiv) else self.mod(dividend, args[1])
        return e.func(*args)

    def _split_whole(self, a: sympy.Expr, k: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
        """a = q*k + rest with q the terms that are whole multiples of k (kept only when rest >= 0)."""
        terms = sympy.Add.make_args(a)
        whole = [t for t in terms if divides(k, t)]
        rest = sympy.Add(*[t for t in terms if not divides(k, t)])
        if not whole or not nonnegative(self.bounds(rest)[0]):
            return sympy.Integer(0), a
        return sympy.expand(sympy.Add(*whole) / k), rest

    def _small_terms(self, a: sympy.Expr, k: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None:
        """a = g*big + small with g > 1 dividing k and 0 <= small < g: (g, big, small)."""
        terms = sympy.Add.make_args(a)
        candidates = []
        for t in terms:
            g = sympy.Mul(*[f for f in sympy.Mul.make_args(t) if _is_size(f, self.upper)])
            if g != 1 and g not in candidates and divides(g, k):
                candidates.append(g)
        found = []
        for g in candidates:
            big = [t for t in terms if divides(g, t)]
            small = sympy.Add(*[t for t in terms if not divides(g, t)])
            if small == 0 or self.below(small, g):
                found.append((len(big), g, sympy.expand(sympy.Add(*big) / g), small))
        if not found:
            return None
        _, g, big, small = min(found, key=lambda f: (f[0], sympy.default_sort_key(f[1])))
        return g, big, small

    def floordiv(self, a: sympy.Expr, k: sympy.Expr) -> sympy.Expr:
        if k == 1:
            return a
        if not _is_size(k, self.upper):  # every rule below needs a positive divisor
            return FloorDiv(a, k)
        if isinstance(a, FloorDiv) and _is_size(a.args[1], self.upper):
            return self.floordiv(a.args[0], sympy.expand(a.args[1] * k))
        if isinstance(a, sympy.Mod) and _is_size(a.args[1], self.upper) and divides(k, a.args[1]):
            return self.mod(self.floordiv(a.args[0], k), quotient(a.args[1], k))
        if self.below(a, k):
            return sympy.Integer(0)
        q, rest = self._split_whole(a, k)
        if q != 0:
            return q + self.floordiv(rest, k)
        split = self._small_terms(a, k)
        if split is not None:
            g, big, _ = split
            return self.floordiv(big, quotient(k, g))
        return FloorDiv(a, k)

    def mod(self, a: sympy.Expr, m: sympy.Expr) -> sympy.Expr:
        if m == 1:
            return sympy.Integer(0)
        if not _is_size(m, self.upper):
            return Mod(a, m)
        if self.below(a, m):
            return a
        if isinstance(a, sympy.Mod) and _is_size(a.args[1], self.upper) and divides(m, a.args[1]):
            return self.mod(a.args[0], m)
        q, rest = self._split_whole(a, m)
        if q != 0:
            return self.mod(rest, m)
        split = self._small_terms(a, m)
        if split is not None:
            g, big, small = split
            return g * self.mod(big, quotient(m, g)) + small
        return Mod(a, m)


# ---------------------------------------------------------------- digits


def _digit(term: sympy.Expr, ranges: _Ranges) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr | None] | None:
    """A term as ``coeff * mod(floordiv(base, div), m)``: (coeff, base, div, m); m None for no mod."""
    split = _split_core(term, ranges)
    if split is None or not _is_size(split[1], ranges.upper):
        return None
    core, coeff = split
    m = None
    if isinstance(core, sympy.Mod):
        core, m = core.args
    if isinstance(core, FloorDiv):
        return coeff, core.args[0], core.args[1], m
    return coeff, core, sympy.Integer(1), m


def _split_core(term: sympy.Expr, ranges: _Ranges) -> tuple[sympy.Expr, sympy.Expr] | None:
    """A term as (core, coefficient): its one floordiv, mod or iteration variable and a factor of size symbols."""
    factors = sympy.Mul.make_args(term)
    cores = [f for f in factors if isinstance(f, (FloorDiv, sympy.Mod)) or f.is_Symbol and f in ranges.upper]
    if len(cores) != 1:
        return None
    coeff = sympy.Mul(*[f for f in factors if f is not cores[0]])
    if coeff.free_symbols & set(ranges.upper) or coeff.has(FloorDiv, sympy.Mod):
        return None
    return cores[0], coeff


def _by_core(terms: list[sympy.Expr], ranges: _Ranges) -> list[sympy.Expr]:
    """Terms of one core gathered into one: expansion splits ``(2*d0 - 1)*mod(x, m)`` into ``2*d0*mod(x, m)`` and
    ``-mod(x, m)``, whose coefficients alone are no digit's (a digit of a symbolic base stayed unmerged, and
    composing such views made each index six times the size of the last)."""
    gathered: dict[sympy.Expr, list[sympy.Expr]] = {}
    rest = []
    for t in terms:
        split = _split_core(t, ranges)
        if split is None:
            rest.append(t)
        else:
            gathered.setdefault(split[0], []).append(split[1])
    return rest + [(c[0] if len(c) == 1 else sympy.factor(sympy.Add(*c))) * core for core, c in gathered.items()]


def _same(a: sympy.Expr, b: sympy.Expr) -> bool:
    return a == b or sympy.cancel(a - b) == 0


def _build(coeff, base, div, m) -> sympy.Expr:
    core = base if div == 1 else FloorDiv(base, div)
    return coeff * (core if m is None else Mod(core, m))


def merge_digits(e: sympy.Expr, ranges: _Ranges) -> sympy.Expr:
    """Merge adjacent digits of one base: c*mod(floordiv(b, a), m) + c*m*mod(floordiv(b, a*m), n) -> c*mod(floordiv(b, a), m*n)."""
    terms = _by_core(list(sympy.Add.make_args(e)), ranges)
    changed = True
    while changed:
        changed = False
        digits = [_digit(t, ranges) for t in terms]
        for i, low in enumerate(digits):
            if low is None or low[3] is None:
                continue
            c, base, div, m = low
            for j, high in enumerate(digits):
                if i == j or high is None or high[1] != base:
                    continue
                if _same(high[2], div * m) and _same(high[0], c * m):
                    merged = _build(c, base, div, None if high[3] is None else sympy.expand(m * high[3]))
                    terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [ranges.fold(merged)]
                    changed = True
                    break
            if changed:
                break
    return sympy.Add(*terms)
