"""Symbolic sizes and index expressions: sympy, with a canonical text form.

Sizes are integers or sympy expressions over size symbols (``s0``, ``s1``, ... as
Dynamo names them); kernel index expressions may also use the iteration
variables ``x`` (the flat index over a kernel's non-reduced domain) and ``r`` (the
reduced domain).  Text form: integers, names, ``+ - *``, parentheses and the
calls ``floordiv(a, b)``, ``mod(a, b)``, ``max(a, b)``, ``min(a, b)``,
``pow(a, n)``; ``print_expr(parse_expr(t))`` is the canonical form of ``t``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

import sympy

Dim: TypeAlias = sympy.Expr
INDEX_VARS = ("x", "r")
_SYMBOL_NAME = re.compile(r"^[a-z][a-z_]*[0-9]*$")


class FloorDiv(sympy.Function):
    """Integer floor division of non-negative integer expressions."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if base == divisor:
            return sympy.Integer(1)
        # (a*d + b) // d == a + b // d for integer a, non-negative b.
        if isinstance(base, sympy.Add):
            quotients = [quotient(t, divisor) for t in base.args]
            whole = [q for q in quotients if is_integer_poly(q)]
            rest = [t for t, q in zip(base.args, quotients, strict=True) if not is_integer_poly(q)]
            if whole and all(t.is_nonnegative for t in rest):
                return sympy.Add(*whole) + FloorDiv(sympy.Add(*rest), divisor)
        q = quotient(base, divisor)
        if is_integer_poly(q):
            return q
        # floordiv(floordiv(a, b), c) == floordiv(a, b*c)
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        return None


class Mod(sympy.Mod):
    """``a mod b`` of non-negative integer expressions, with cheap evaluation rules.

    sympy's own ``Mod.eval`` takes a polynomial gcd of its arguments: on the index expressions of a
    symbolic convolution, rebuilt on every substitution, that cost most of a compile (minutes for a
    dynamic ResNet).  These rules are the ones fusec relies on; ``fusec.base.indexing`` does the rest.
    A subclass, so ``isinstance(e, sympy.Mod)`` still holds; build mods with this class, never sympy's."""

    @classmethod
    def eval(cls, p, q):
        if q == 1 or p == 0 or p == q:
            return sympy.Integer(0)
        if p.is_Integer and q.is_Integer:
            return sympy.Integer(int(p) % int(q))
        if isinstance(p, sympy.Mod) and p.args[1] == q:
            return p
        terms = sympy.Add.make_args(p)
        kept = [t for t in terms if not is_integer_poly(quotient(t, q))]  # (a*q + b) mod q == b mod q
        if len(kept) < len(terms):
            return cls(sympy.Add(*kept), q)
        return None


@functools.lru_cache(maxsize=1 << 16)
def quotient(e: sympy.Expr, d: sympy.Expr) -> sympy.Expr:
    """``sympy.cancel(e / d)``, without cancel where it cannot find more than sympy's own arithmetic.

    Dividing a sum of monomials by a monomial (a size, an integer, a product of them) term by term is
    exact: each term's common factors cancel as the product is formed.  ``cancel`` (a multivariate gcd) is
    left for a divisor that is a sum or a sum with factored terms, where it can find a common factor; on
    the index expressions of symbolic convolutions it took most of a minute per vertical fusion."""
    terms = sympy.Add.make_args(e)
    if not isinstance(d, sympy.Add) and all(not t.has(sympy.Add) or _atoms_only(t) for t in terms):
        return sympy.Add(*(t / d for t in terms))
    plain = e / d  # a factor d of e cancels here already
    if is_integer_poly(plain) or _nodes(e) + _nodes(d) > CANCEL_LIMIT:
        return plain
    return sympy.cancel(plain)


# Past this many nodes ``cancel`` costs seconds (a multivariate gcd over the floordivs of a symbolic
# convolution's indexing): the quotient stays unsimplified, which only means a floordiv fusec keeps.
CANCEL_LIMIT = 60


def _nodes(e: sympy.Expr) -> int:
    return sum(1 for _ in sympy.preorder_traversal(e))


def _atoms_only(t: sympy.Expr) -> bool:
    """A monomial whose factors' sums sit only inside function atoms (floordiv(a + b, c)), not as factors."""
    return all(not isinstance(f, sympy.Add) and not (isinstance(f, sympy.Pow) and isinstance(f.base, sympy.Add))
               for f in sympy.Mul.make_args(t))


def is_integer_poly(e: sympy.Expr) -> bool:
    """Whether ``e`` is a polynomial with integer coefficients in integer symbols (an integer for every value)."""
    if e.is_Integer:
        return True
    if e.is_Symbol:
        return bool(e.is_integer)
    if isinstance(e, (sympy.Add, sympy.Mul)):
        return all(is_integer_poly(a) for a in e.args)
    if isinstance(e, sympy.Pow):
        return is_integer_poly(e.base) and e.exp.is_Integer and e.exp >= 0
    return bool(e.is_integer) and not e.is_Rational


def size_symbol(name: str) -> sympy.Symbol:
    """A size symbol: a positive integer."""
    return sympy.Symbol(name, integer=True, positive=True)


def index_symbol(name: str) -> sympy.Symbol:
    """An iteration variable: a non-negative integer."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def symbol(name: str) -> sympy.Symbol:
    return index_symbol(name) if name in INDEX_VARS else size_symbol(name)


def as_expr(value: int | str | sympy.Basic) -> sympy.Expr:
    if isinstance(value, bool):
        raise TypeError("a size cannot be a bool")
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, str):
        return parse_expr(value)
    return sympy.sympify(value)


# ---------------------------------------------------------------- text form


def print_expr(e: sympy.Basic) -> str:
    """The canonical text of an integer expression (parses back with ``parse_expr``)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        terms = e.as_ordered_terms()
        # A positive term first reads better: "max(2, s0) - 3*s1", not "(-3)*s1 + ...".
        terms = [t for t in terms if t.as_coeff_Mul()[0] > 0] + [t for t in terms if t.as_coeff_Mul()[0] < 0]
        out = _print_term(terms[0])
        for t in terms[1:]:
            coeff, _ = t.as_coeff_Mul()
            if coeff < 0:
                out += " - " + _print_term(-t)
            else:
                out += " + " + _print_term(t)
        return out
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        return _print_term(e)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        return f"pow({print_expr(e.base)}, {int(e.exp)})"
    if isinstance(e, FloorDiv):
        return f"floordiv({print_expr(e.args[0])}, {print_expr(e.args[1])})"
    if isinstance(e, sympy.Mod):
        return f"mod({print_expr(e.args[0])}, {print_expr(e.args[1])})"
    if isinstance(e, sympy.Max):
        return "max(" + ", ".join(print_expr(a) for a in _sorted(e.args)) + ")"
    if isinstance(e, sympy.Min):
        return "min(" + ", ".join(print_expr(a) for a in _sorted(e.args)) + ")"
    raise ValueError(f"cannot print {e!r} as a fusec integer expression")


def _sorted(args: Iterable[sympy.Basic]) -> list[sympy.Basic]:
    return sorted(args, key=sympy.default_sort_key)


def _print_term(t: sympy.Expr) -> str:
    if isinstance(t, sympy.Mul):
        coeff, rest = t.as_coeff_Mul()
        factors = [f for f in sympy.Mul.make_args(rest)]
        parts = [_print_factor(f) for f in factors]
        if not coeff.is_Integer:
            raise ValueError(f"non-integer coefficient in {t}")
        if coeff == -1:
            return "-" + "*".join(parts)
        if coeff != 1:
            parts.insert(0, str(int(coeff)))
        return "*".join(parts)
    return _print_factor(t)


def _print_factor(f: sympy.Expr) -> str:
    s = print_expr(f)
    return f"({s})" if isinstance(f, sympy.Add) or (f.is_Integer and f < 0) else s


class ExprSyntaxError(ValueError):
    """Raised with the offending position (an index into the text)."""

    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.position = position


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(.))")
_CALLS = {
    "floordiv": (2, lambda a, b: FloorDiv(a, b)),
    "mod": (2, lambda a, b: Mod(a, b)),
    "max": (None, lambda *a: sympy.Max(*a)),
    "min": (None, lambda *a: sympy.Min(*a)),
    "pow": (2, lambda a, b: a**b),
}


class ExprReader:
    """A recursive-descent reader of the text form over a token source.

    The source offers four calls that consume only on a match, so that the same
    grammar serves plain strings (``parse_expr``) and xDSL's parser (the
    dialect's attributes) through its public ``parse_optional_*`` methods:
    ``punct(p) -> bool``, ``integer() -> int | None``, ``identifier() -> str | None``
    and ``error(message)`` (raises).  ``expr(first)`` continues an expression whose
    first term a caller has already read (an extern argument that starts with a name).
    """

    def __init__(self, source):
        self.source = source

    def expr(self, first: sympy.Expr | None = None) -> sympy.Expr:
        value = self.term() if first is None else first
        while True:
            if self.source.punct("+"):
                value = value + self.term()
            elif self.source.punct("-"):
                value = value - self.term()
            else:
                return value

    def term(self, first: sympy.Expr | None = None) -> sympy.Expr:
        value = self.unary() if first is None else first
        while self.source.punct("*"):
            value = value * self.unary()
        return value

    def unary(self) -> sympy.Expr:
        if self.source.punct("-"):
            return -self.unary()
        return self.atom()

    def atom(self) -> sympy.Expr:
        if self.source.punct("("):
            value = self.expr()
            self.expect(")")
            return value
        number = self.source.integer()
        if number is not None:
            return sympy.Integer(number)
        name = self.source.identifier()
        if name is None:
            self.source.error("expected an integer expression")
        return self.named(name)

    def named(self, name: str) -> sympy.Expr:
        """The atom that starts with ``name``: a call ``floordiv(a, b)`` or a symbol."""
        if name in _CALLS:
            if not self.source.punct("("):
                self.source.error(f"'{name}' must be called: {name}(...)")
            args = [self.expr()]
            while self.source.punct(","):
                args.append(self.expr())
            self.expect(")")
            arity, build = _CALLS[name]
            if arity is not None and len(args) != arity:
                self.source.error(f"'{name}' takes {arity} arguments, got {len(args)}")
            return build(*args)
        if not _SYMBOL_NAME.match(name):
            self.source.error(f"'{name}' is not a size symbol or index variable")
        return symbol(name)

    def expect(self, punct: str) -> None:
        if not self.source.punct(punct):
            self.source.error(f"expected '{punct}'")


class _TextTokens:
    """``ExprReader``'s token source over a string."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = [(m.group(0).strip(), m.start(0) + len(m.group(0)) - len(m.group(0).lstrip())) for m in _TOKEN.finditer(text)]
        self.tokens = [t for t in self.tokens if t[0]]
        self.pos = 0

    def _peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def _take(self) -> str:
        self.pos += 1
        return self.tokens[self.pos - 1][0]

    def punct(self, p: str) -> bool:
        if self._peek() == p:
            self._take()
            return True
        return False

    def integer(self) -> int | None:
        tok = self._peek()
        return int(self._take()) if tok is not None and tok.isdigit() else None

    def identifier(self) -> str | None:
        tok = self._peek()
        return self._take() if tok is not None and (tok[0].isalpha() or tok[0] == "_") else None

    def error(self, msg: str):
        raise ExprSyntaxError(msg, self.tokens[self.pos][1] if self.pos < len(self.tokens) else len(self.text))


def parse_expr(text: str) -> sympy.Expr:
    """Parse the text form; raises ExprSyntaxError naming the position."""
    tokens = _TextTokens(text)
    value = ExprReader(tokens).expr()
    if tokens.pos != len(tokens.tokens):
        tokens.error(f"unexpected {tokens._peek()!r} after expression")
    return value


# ---------------------------------------------------------------- shape helpers


def free_size_symbols(exprs: Iterable[sympy.Basic | int]) -> set[str]:
    return {s.name for e in exprs for s in (e if isinstance(e, sympy.Basic) else sympy.sympify(e)).free_symbols
            if s.name not in INDEX_VARS}


def numel(shape: Sequence[Dim]) -> sympy.Expr:
    return sympy.Mul(*shape) if shape else sympy.Integer(1)


def contiguous_strides(shape: Sequence[Dim]) -> list[sympy.Expr]:
    strides: list[sympy.Expr] = []
    acc: sympy.Expr = sympy.Integer(1)
    for d in reversed(shape):
        strides.append(acc)
        acc = acc * d
    return list(reversed(strides))


def dense_strides(shape: Sequence, order: Sequence[int]) -> list:
    """The strides of a dense tensor of ``shape`` laid out in ``order`` (its dims, outermost first): the inverse of
    ``dense_dim_order``; ints for int sizes, expressions for symbolic ones."""
    strides: list = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d], step = step, step * shape[d]
    return strides


def dense_dim_order(shape: Sequence[Dim], strides: Sequence[Dim]) -> tuple[int, ...] | None:
    """The order of a dense layout's dims, outermost first (row-major: ``(0, 1, ..., n-1)``; channels-last NCHW:
    ``(0, 2, 3, 1)``), proved for every size: each stride is the product of the sizes inside it.  None where the
    layout is not dense.  Size-1 dims address nothing and come first."""
    dims = [as_expr(d) for d in shape]
    order: list[int] = []
    left = [d for d in range(len(dims)) if dims[d] != 1]
    inner: sympy.Expr = sympy.Integer(1)
    while left:
        nxt = next((d for d in reversed(left) if sympy.expand(as_expr(strides[d]) - inner) == 0), None)
        if nxt is None:
            return None
        left.remove(nxt)
        order.append(nxt)
        inner = inner * dims[nxt]
    return tuple([d for d in range(len(dims)) if dims[d] == 1] + order[::-1])


def provably_equal(a: sympy.Basic, b: sympy.Basic) -> bool:
    """True only when sympy proves a == b for every value of the symbols."""
    return _provably_zero(sympy.sympify(a) - sympy.sympify(b))


SIMPLIFY_MAX_OPS = 24  # larger differences are not simplified: not proved equal


@functools.lru_cache(maxsize=8192)
def _provably_zero(e: sympy.Expr) -> bool:
    # Symbolic shapes ask the same questions many times; most differences are polynomials that expand to 0.
    # A polynomial is zero exactly when its expansion is: simplify (slow, and its first call imports half of
    # sympy) only has more to say about floordiv, mod, max, min -- and only about small ones: on Swin's nested
    # window-padding floordivs (30-110 ops) it took 0.2-0.7 s each and proved none (7.4 s of a dynamic=True first
    # call), and none in the test suite (passes, analysis, frontend, lowering, runtime, models, backend).
    if e == 0:
        return True
    expanded = sympy.expand(e)
    if expanded == 0:
        return True
    if expanded.is_polynomial() or sympy.count_ops(e) > SIMPLIFY_MAX_OPS:
        return False
    return sympy.simplify(e) == 0


def broadcast_shapes(*shapes: Sequence[Dim]) -> list[sympy.Expr] | None:
    """Numpy broadcasting on symbolic dims; None when it cannot be proved legal."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[sympy.Expr] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        non_one = [d for d in dims if d != 1]
        if not non_one:
            out.append(sympy.Integer(1))
            continue
        first = non_one[0]
        if any(not provably_equal(d, first) for d in non_one[1:]):
            return None
        out.append(first)
    return out


def evaluate(e: sympy.Basic, env: Mapping[str, int]) -> int:
    """The integer value of an expression under a binding of its symbols.

    Executors evaluate sizes on every call (a dynamic graph's SymInt outputs, derived symbols): each distinct
    expression is compiled once to Python arithmetic, where sympy's substitution took ~0.7 ms a call."""
    e = sympy.sympify(e)
    names, fn = _compiled(e)
    try:
        value = fn(*[env[n] for n in names])
    except KeyError:
        unbound = {n for n in names if n not in env}
        raise KeyError(f"unbound size symbols {sorted(unbound)} in {print_expr(e)}") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _evaluate_exactly(e, env)  # a rational step, or something else lambdify computed in floats


def _evaluate_exactly(e: sympy.Expr, env: Mapping[str, int]) -> int:
    value = e.subs({symbol(k): v for k, v in env.items()})
    if not value.is_Integer:
        unbound = free_size_symbols([value])
        raise KeyError(f"unbound size symbols {sorted(unbound)} in {print_expr(e)}")
    return int(value)


_INTEGER_OPS = {"FloorDiv": lambda a, b: a // b, "Mod": lambda a, b: a % b, "Max": max, "Min": min}


@functools.lru_cache(maxsize=1 << 14)
def _compiled(e: sympy.Expr) -> tuple[tuple[str, ...], Callable[..., object]]:
    """(its symbols' names, a Python function of their values) for ``e``; integer arithmetic throughout where ``e``
    has integer coefficients (FloorDiv and Mod as ``//`` and ``%``, as sizes are non-negative)."""
    symbols = sorted(e.free_symbols, key=lambda s: natural_key(s.name))
    fn = sympy.lambdify(symbols, e, modules=[_INTEGER_OPS, "math"])
    return tuple(s.name for s in symbols), fn


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 2 ** math.ceil(math.log2(n))


# ---------------------------------------------------------------- flat indices


def flat_to_dims(var: sympy.Expr, shape: Sequence[Dim]) -> list[sympy.Expr]:
    """The per-dim indices of a row-major flat index ``var`` over ``shape``.

    The first dim needs no ``mod``: the flat index stays below the element count.
    A shape with a zero dim has no elements: no index is ever computed, all are 0.
    """
    if any(sympy.sympify(d) == 0 for d in shape):
        return [sympy.Integer(0)] * len(shape)
    strides = contiguous_strides(shape)
    out: list[sympy.Expr] = []
    for k, (size, stride) in enumerate(zip(shape, strides, strict=True)):
        if size == 1:
            out.append(sympy.Integer(0))
            continue
        e = FloorDiv(var, stride)
        out.append(e if k == 0 or all(d == 1 for d in shape[:k]) else Mod(e, size))
    return out


# ---------------------------------------------------------------- intervals


def value_range(e: sympy.Basic, bounds: Mapping[str, tuple[float, float]],
                unknown: tuple[float, float] = (0, math.inf)) -> tuple[float, float]:
    """Interval (lo, hi) that ``e`` stays in when each symbol stays in ``bounds[name]``.

    Interval arithmetic: sound, not tight.  A symbol without bounds is in ``unknown``.
    """
    e = sympy.sympify(e)
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        return bounds.get(e.name, unknown)
    args = [value_range(a, bounds, unknown) for a in e.args]
    if isinstance(e, sympy.Add):
        return sum(a[0] for a in args), sum(a[1] for a in args)
    if isinstance(e, sympy.Mul):
        lo, hi = args[0]
        for alo, ahi in args[1:]:
            products = [_mul(p, q) for p in (lo, hi) for q in (alo, ahi)]
            lo, hi = min(products), max(products)
        return lo, hi
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        lo, hi = args[0]
        for _ in range(int(e.exp) - 1):
            products = [_mul(p, q) for p in (lo, hi) for q in args[0]]
            lo, hi = min(products), max(products)
        return lo, hi
    if isinstance(e, FloorDiv):
        (alo, ahi), (blo, bhi) = args
        if alo >= 0 and blo >= 1:
            return alo // bhi if bhi != math.inf else 0, ahi // blo if ahi != math.inf else math.inf
        return -math.inf, math.inf
    if isinstance(e, sympy.Mod):
        (alo, ahi), (blo, bhi) = args
        if alo >= 0 and blo >= 1:
            return 0, min(ahi, bhi - 1)
        return -math.inf, math.inf
    if isinstance(e, sympy.Max):
        return max(a[0] for a in args), max(a[1] for a in args)
    if isinstance(e, sympy.Min):
        return min(a[0] for a in args), min(a[1] for a in args)
    return -math.inf, math.inf


def settle_extrema(e: sympy.Expr, bounds: Mapping[str, tuple[float, float]]) -> sympy.Expr:
    """``e`` with each max/min whose arguments the symbols' bounds order replaced by the winner.

    torch writes a convolution's strides as ``8*max(1, s - 2)**2`` (a guard for empty outputs); where the
    graph's guards keep ``s >= 3`` that is ``8*(s - 2)**2``, and the layout is plainly contiguous.
    """
    def settle(t: sympy.Expr) -> sympy.Expr:
        if not t.args:
            return t
        t = t.func(*[settle(a) for a in t.args])
        if isinstance(t, (sympy.Max, sympy.Min)):
            larger_wins = isinstance(t, sympy.Max)
            winner = t.args[0]
            for a in t.args[1:]:
                lo, hi = value_range(sympy.expand(a - winner), bounds, (-math.inf, math.inf))
                if lo >= 0:  # a >= winner
                    winner = a if larger_wins else winner
                elif hi <= 0:  # a <= winner
                    winner = winner if larger_wins else a
                else:
                    return t
            return winner
        return t

    return settle(e) if e.has(sympy.Max, sympy.Min) else e


def _mul(a: float, b: float) -> float:
    if a == 0 or b == 0:
        return 0  # 0 * inf is 0 here: the bound of a zero factor
    return a * b


def natural_key(name: str) -> tuple[str, int]:
    """Sort key putting ``s2`` before ``s10`` (name, then its trailing number)."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def expand_definitions(e: sympy.Expr, definitions: Mapping[str, sympy.Expr]) -> sympy.Expr:
    """``e`` with every derived symbol replaced by its definition, down to the symbols it starts from."""
    for _ in range(len(definitions) + 1):
        used = {size_symbol(s): d for s, d in definitions.items() if s in free_size_symbols([e])}
        if not used:
            return e
        e = e.xreplace(used)
    raise ValueError("size symbol definitions refer to each other in a cycle")


def print_fact(lhs: sympy.Expr, rhs: sympy.Expr) -> str:
    """A size fact's text form, ``s38*s97 = s3*s88`` (the IR's, and every message naming one)."""
    return f"{print_expr(lhs)} = {print_expr(rhs)}"


def apply_facts(e: sympy.Expr, facts: Sequence[tuple[sympy.Expr, sympy.Expr]]) -> sympy.Expr:
    """``e`` with each fact's left side rewritten into its right side, in order (``s38*s97 -> s3*s88`` also
    turns ``2*s1*s38*s97`` into ``2*s1*s3*s88``: sympy's substitution of a product matches its factors)."""
    e = sympy.sympify(e)
    for old, new in facts:
        if old.free_symbols <= e.free_symbols:
            e = e.subs(old, new)
    return e
