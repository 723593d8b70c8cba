"""Lark grammars (``.lark``) to the grammar IR.

Lark's own loader (:class:`lark.load_grammar.GrammarBuilder`) reads the text, so ``%import``
(of ``common.lark`` and of files next to ``filename``), ``%override``, ``%extend``, templates,
``?rule``/``_rule``/``!rule`` and aliases mean exactly what they mean to Lark, and every grammar
Lark refuses is refused here too (Lark's ``Grammar.compile`` is run as a check).  The translation
then works from Lark's un-compiled definitions, so ``x*``, ``x+``, ``x?``, ``[x]``, ``x ~ n`` and
``x ~ n..m`` become IR repeats rather than helper rules:

* a rule becomes an IR rule of the same name; a template use ``sep{item, ","}`` becomes one IR
  rule per distinct argument list; tree-shaping marks (``?``, ``_``, ``!``, ``-> alias``) and
  priorities change no language and are dropped;
* a named terminal used by a rule becomes an IR rule of the same name; terminals inside other
  terminals, and anonymous ``"..."``/``/.../`` literals inside rules, are inlined;
* string terminals become literals (case-insensitive with the ``i`` flag), regex terminals go
  through :func:`pda.frontends.regex.regex_to_ir` in the Python dialect with their flags;
* ``%ignore`` terminals form a rule ``__ignore: (IGN1 | IGN2 | ...)*`` that is placed before every
  terminal occurrence and once at the end of the start rule, so ignored text may appear between
  any two terminals and at both ends — never inside a terminal — as with Lark's lexers.  Each gap
  is owned by the terminal after it, so this adds no ambiguity beyond that of ``(IGN)*`` itself.

Semantics: a byte automaton is scannerless.  Every way of cutting the text into terminals counts,
which is what Lark's Earley parser does with ``lexer="dynamic_complete"``.  Lark's other lexers
give a different (smaller) language in corner cases, and these differences are not papered over:

* the standard and contextual lexers take the longest match (then the highest priority), so with
  ``start: NAME NAME`` and no ``%ignore``, the text ``"ab"`` is one NAME to them and is refused,
  while here it splits as ``"a" + "b"`` and is accepted;
* terminal priorities (``A.2: ...``) and rule priorities only choose between parses; ignored here;
* a terminal's language is every string its regex *fully* matches.  Lark's lexers call
  ``re.match``, which prefers the first alternative and the shortest lazy repetition, so for
  ``/a|ab/`` Lark only ever reads ``"a"`` and for ``/a+?/`` only ``"a"``; here both lengths count.
  The two lazy idioms of Lark's ``common.lark`` are translated exactly as ``re.match`` reads them:
  ``"q" /.*?/ /(?<!\\\\)(\\\\\\\\)*?/ "q"`` (``ESCAPED_STRING``: a quoted string whose closing quote is
  the first one not escaped by a backslash) and ``"open" /X*?/ "close"`` with ``X`` one character
  class (``C_COMMENT``: the body never contains ``close``), and so is ``/open X*? close/`` in one
  regex (``/".*?"/``: a quoted string ending at its first quote).  Other lazy quantifiers count as
  greedy;
* an ``%ignore`` regex such as ``/[ \\t]+/`` is matched greedily by Lark (it never consumes only
  part of a run of blanks); here it may, which only matters if a terminal can start with a blank.

Refused: ``%declare`` (a terminal fed by a custom lexer has no bytes to match) and terminals that
match the empty string (Lark refuses them too).
"""

from __future__ import annotations

import re
from typing import Iterator, Sequence

from lark import Token, Tree
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import UnexpectedInput, VisitError
from lark.grammar import NonTerminal, Terminal
from lark.lexer import Pattern, PatternRE, PatternStr
from lark.load_grammar import Definition, GrammarBuilder, _get_parser, _literal_to_pattern

from pda.errors import GrammarError, GrammarSyntaxError, RegexError, UndefinedRuleError
from pda.ir import EPSILON, Alt, Bytes, Expr, GrammarIR, Ref, Repeat, Seq, alt, opt, repeat, seq, star

from ._lark_lazy import lazy_idiom, lazy_regex
from .regex import literal_to_ir, regex_to_ir

__all__ = ["parse_lark", "IGNORE_RULE"]

IGNORE_RULE = "__ignore"  # the rule of %ignore'd terminals (Lark reserves names starting with "__")
_START_WRAPPER = "__start"  # start rule plus trailing ignore, when the start rule is also called
_MAX_TEMPLATE_INSTANCES = 10_000


def parse_lark(text: str, *, start: str = "start", filename: str | None = None) -> GrammarIR:
    """Translate a Lark grammar into a :class:`GrammarIR` whose start rule is ``start``.

    Raises :class:`GrammarSyntaxError` for grammars Lark refuses, for ``%declare`` and for
    zero-width terminals, and :class:`UndefinedRuleError` for names used but not defined (both
    with line and column when they can be found).
    """
    where = _Positions(text)
    builder = GrammarBuilder()
    try:
        builder.load_grammar(text, filename or "<string>")
        grammar = builder.build()
    except LarkGrammarError as exc:
        raise _map_grammar_error(exc, text, filename, where) from None
    except UnexpectedInput as exc:
        raise _map_unexpected(exc, text, filename) from None
    except VisitError as exc:
        raise _map_visit_error(exc, text, filename) from None
    except FileNotFoundError as exc:
        name = exc.filename or str(exc)
        line, col = where.imports[0] if where.imports else (None, None)
        raise GrammarSyntaxError(
            f"cannot find the grammar to import: {name}", filename=filename, line=line, column=col, source=text
        ) from None
    definitions: dict[str, Definition] = builder._definitions  # noqa: SLF001 - lark has no public accessor
    for name, d in definitions.items():
        if d.tree is None:
            line, col = where.declared.get(name, (None, None))
            raise GrammarSyntaxError(
                f"%declare'd terminals cannot be matched by a byte-level automaton "
                f"(they come from a custom lexer or postlexer): {name}",
                filename=filename, line=line, column=col, source=text, rule=name,
            )
    if start not in definitions or definitions[start].is_term or definitions[start].params:
        raise UndefinedRuleError(f"the start rule '{start}' is not defined", filename=filename, rule=start)
    try:
        grammar.compile([start], ())  # Lark's remaining checks (bad ranges, empty terminals, ...)
    except LarkGrammarError as exc:
        raise _map_grammar_error(exc, text, filename, where) from None
    except VisitError as exc:
        raise _map_visit_error(exc, text, filename) from None
    return _Translator(definitions, builder._ignore_names, where, text, filename).run(start)  # noqa: SLF001


# ----------------------------------------------------------------------------- positions & errors


class _Positions:
    """Where names are defined and used in the top-level grammar text (from Lark's own parser)."""

    def __init__(self, text: str) -> None:
        self.defs: dict[str, tuple[int, int]] = {}
        self.dup_defs: dict[str, tuple[int, int]] = {}
        self.uses: dict[str, list[tuple[str, int, int]]] = {}  # definition -> [(used name, line, col)]
        self.declared: dict[str, tuple[int, int]] = {}
        self.imports: list[tuple[int, int]] = []
        self.ignores: list[tuple[str, int, int]] = []
        try:
            tree = _get_parser().parse(text + "\n", "start")
        except (UnexpectedInput, LarkGrammarError):
            return  # the loader reports the error itself
        for stmt in tree.children:
            data = stmt.data
            if data in ("override", "extend"):
                stmt = stmt.children[0]
                data = stmt.data
            if data in ("rule", "term"):
                tok = stmt.children[1] if data == "rule" else stmt.children[0]
                pos = (tok.line, tok.column)
                if tok.value in self.defs:
                    self.dup_defs.setdefault(tok.value, pos)
                self.defs.setdefault(tok.value, pos)
                self.uses.setdefault(tok.value, []).extend(_used_names(stmt))
            elif data == "declare":
                for name, line, col in _used_names(stmt):
                    self.declared.setdefault(name, (line, col))
            elif data == "ignore":
                self.ignores.extend(_used_names(stmt))
                first = next(stmt.scan_values(lambda v: isinstance(v, Token)), None)
                if first is not None and not self.ignores:
                    self.ignores.append(("", first.line, first.column))
            elif data == "import":
                toks = list(stmt.scan_values(lambda v: isinstance(v, Token)))
                if toks:
                    self.imports.append((toks[0].line, toks[0].column))
                for tok in toks[1:]:
                    self.defs.setdefault(tok.value, (tok.line, tok.column))

    def use_of(self, name: str, in_def: str | None = None) -> tuple[int | None, int | None]:
        """Where ``name`` is first used (inside definition ``in_def`` when given)."""
        for d, uses in self.uses.items():
            if in_def is not None and d != in_def:
                continue
            for used, line, col in uses:
                if used == name:
                    return line, col
        return None, None


def _used_names(tree: Tree) -> Iterator[tuple[str, int, int]]:
    """The (name, line, column) of every rule/terminal/template name used inside ``tree``."""
    for sub in tree.iter_subtrees_topdown():
        if sub.data in ("terminal", "nonterminal"):
            tok = sub.children[0]
            yield tok.value, tok.line, tok.column


_LOC_RE = re.compile(r"at line (\d+) column (\d+)")
_UNDEF_RE = re.compile(r"^(?:Rule|Terminal|Template) '([^']+)' used but not defined \(in (?:rule|terminal) ([^)]+)\)")


def _map_grammar_error(exc: LarkGrammarError, text: str, filename: str | None, where: _Positions) -> GrammarError:
    """Lark's GrammarError as a pda error, with the place when Lark's message or the text gives it."""
    msg = str(exc.args[0]) if exc.args else str(exc)
    line: int | None = None
    col: int | None = None
    loc = _LOC_RE.search(msg)
    if loc:
        line, col = int(loc.group(1)), int(loc.group(2))
        msg = msg.split("\n\n", 1)[0]
        msg = re.sub(r",? at line \d+ column \d+(?: in .*)?:?\s*$", "", msg, flags=re.S).strip()
        return GrammarSyntaxError(msg, filename=filename, line=line, column=col, source=text)
    undef = _UNDEF_RE.match(msg)
    if undef:
        name, in_def = undef.group(1), undef.group(2)
        line, col = where.use_of(name, in_def)
        kind = "Terminal" if name.lstrip("_")[:1].isupper() else "Rule"  # Lark names the user's kind
        if not msg.startswith("Template"):
            msg = f"{kind} '{name}' used but not defined (in {in_def})"
        return UndefinedRuleError(msg, filename=filename, line=line, column=col, source=text, rule=name)
    m = re.match(r"^Terminal used but not defined: (\S+)", msg)
    if m:
        line, col = where.use_of(m.group(1))
        return UndefinedRuleError(msg, filename=filename, line=line, column=col, source=text, rule=m.group(1))
    m = re.match(r"^Terminals (.*) were marked to ignore but were not defined", msg)
    if m:
        missing = re.findall(r"'([^']+)'", m.group(1))
        hit = [(ln, c) for n, ln, c in where.ignores if n in missing]
        line, col = hit[0] if hit else (None, None)
        return UndefinedRuleError(msg, filename=filename, line=line, column=col, source=text)
    m = re.match(r"^(?:Rule|Terminal) '([^']+)' defined more than once", msg)
    if m:
        line, col = where.dup_defs.get(m.group(1), (None, None))
        return GrammarSyntaxError(msg, filename=filename, line=line, column=col, source=text, rule=m.group(1))
    m = re.search(r"\(in (?:rule|terminal|template) ([^)\s]+)\)|\(Error at ([^)\s]+)\)", msg)
    if m:
        line, col = where.defs.get(m.group(1) or m.group(2), (None, None))
    return GrammarSyntaxError(msg, filename=filename, line=line, column=col, source=text)


def _map_visit_error(exc: VisitError, text: str, filename: str | None) -> GrammarSyntaxError:
    """An error Lark's grammar loader raised while reading one node (a range such as ``"a"i..
    "z"`` or ``"ab".."c"``), with the place of the node's first token."""
    tree = exc.obj
    tokens = [t for t in tree.children if isinstance(t, Token)] if isinstance(tree, Tree) else []
    first = next((t for t in tokens if isinstance(t.line, int)), None)
    line, col = (first.line, first.column) if first is not None else (None, None)
    if exc.rule == "range" and len(tokens) == 2:
        msg = (f"bad range {tokens[0]}..{tokens[1]}: a range goes from one character to one character, "
               f"each a plain string of length 1 without flags (like \"a\"..\"z\")")
    else:
        msg = f"Lark cannot read this {exc.rule}: {str(exc.orig_exc) or type(exc.orig_exc).__name__}"
    return GrammarSyntaxError(msg, filename=filename, line=line, column=col, source=text)


_TOKEN_NAMES = {
    "_COLON": "':'", "_DOT": "'.'", "_DOTDOT": "'..'", "_COMMA": "','", "_OR": "'|'", "_TO": "'->'",
    "_LPAR": "'('", "_RPAR": "')'", "_LBRA": "'['", "_RBRA": "']'", "_LBRACE": "'{'", "_RBRACE": "'}'",
    "_NL": "end of line", "_NL_OR": "'|' on a new line", "$END": "end of grammar", "RULE": "a rule name",
    "TERMINAL": "a terminal name", "STRING": "a string", "REGEXP": "a regexp", "NUMBER": "a number",
    "OP": "an operator", "TILDE": "'~'", "RULE_MODIFIERS": "a rule modifier",
}


def _map_unexpected(exc: UnexpectedInput, text: str, filename: str | None) -> GrammarSyntaxError:
    """A syntax error Lark's grammar parser raised without a friendlier message of its own."""
    line = exc.line if isinstance(exc.line, int) and exc.line > 0 else None
    col = exc.column if isinstance(exc.column, int) and exc.column > 0 else None
    token = getattr(exc, "token", None)
    if token is not None:
        shown = _TOKEN_NAMES.get(token.type, repr(str(token)))
        expected = sorted(_TOKEN_NAMES.get(t, t.lower()) for t in getattr(exc, "expected", None) or ())
        msg = f"unexpected {shown}; expected {', '.join(expected) or 'nothing'}"
    else:
        msg = "unexpected input"
    return GrammarSyntaxError(msg, filename=filename, line=line, column=col, source=text)


# ----------------------------------------------------------------------------- translation


class _Translator:
    """Walks Lark's definition trees and builds the IR rules reachable from the start rule."""

    def __init__(
        self, definitions: dict[str, Definition], ignore: Sequence[str], where: _Positions, text: str,
        filename: str | None,
    ) -> None:
        self.defs = definitions
        self.ignore = list(ignore)
        self.where = where
        self.text = text
        self.filename = filename
        self.rules: dict[str, Expr] = {}
        self.positions: dict[str, tuple[int, int]] = {}
        self.todo: list[tuple[str, Tree, dict[str, Expr], str]] = []  # (IR name, tree, env, def name)
        self.instances: dict[tuple[str, tuple[Expr, ...]], str] = {}
        self.term_memo: dict[int, Expr] = {}
        self.ign: Expr = Ref(IGNORE_RULE) if self.ignore else EPSILON

    # -- driver

    def run(self, start: str) -> GrammarIR:
        """Translate everything reachable from ``start`` and return the grammar."""
        self._want_rule(start)
        while self.todo:
            name, tree, env, def_name = self.todo.pop()
            self.rules[name] = self._rule(tree, env)
            if def_name in self.where.defs:
                self.positions[name] = self.where.defs[def_name]
        ir_start = start
        if self.ignore:
            body = alt(*(self._terminal_ref(n) for n in self.ignore))
            self.rules[IGNORE_RULE] = star(body)
            first = self.where.ignores[0] if self.where.ignores else None
            if first is not None:
                self.positions[IGNORE_RULE] = (first[1], first[2])
            if any(r.name == start for e in self.rules.values() for r in _refs(e)):
                ir_start = _START_WRAPPER
                self.rules[ir_start] = seq(Ref(start), self.ign)
                if start in self.positions:
                    self.positions[ir_start] = self.positions[start]
            else:
                self.rules[start] = seq(self.rules[start], self.ign)
        return GrammarIR(self.rules, ir_start, self.positions, self.filename, self.text)

    def _want_rule(self, name: str) -> Ref:
        if name not in self.rules and all(t[0] != name for t in self.todo):
            self.rules[name] = EPSILON  # placeholder, so recursion finds it
            self.todo.append((name, self.defs[name].tree, {}, name))
        return Ref(name)

    def _terminal_ref(self, name: str) -> Ref:
        """A reference to the IR rule holding terminal ``name`` (created on first use)."""
        if name not in self.rules:
            expr = self._term(self.defs[name].tree)
            self._check_not_empty(name, expr)
            self.rules[name] = expr
            if name in self.where.defs:
                self.positions[name] = self.where.defs[name]
        return Ref(name)

    def _check_not_empty(self, name: str, expr: Expr, token: Token | None = None) -> None:
        """Refuse a terminal that matches the empty string, as Lark does."""
        if _nullable(expr):
            line, col = self._token_pos(token) if token is not None else self.where.defs.get(name, (None, None))
            shown = name if not name.startswith("__IGNORE") else "an %ignore'd pattern"
            raise GrammarSyntaxError(
                f"terminal {shown} matches the empty string (Lark refuses zero-width terminals too)",
                filename=self.filename, line=line, column=col, source=self.text, rule=name,
            )

    # -- rules

    def _rule(self, tree: Tree, env: dict[str, Expr]) -> Expr:
        """The IR of a rule-body tree; ``env`` binds template parameters to IR expressions."""
        data = tree.data
        kids = tree.children
        if data == "expansions":
            return alt(*(self._rule(k, env) for k in kids))
        if data == "alias":
            return self._rule(kids[0], env)
        if data == "expansion":
            return seq(*(self._rule(k, env) for k in kids))
        if data == "maybe":
            return opt(self._rule(kids[0], env))
        if data == "expr":
            return _apply_op(self._rule(kids[0], env), kids[1:])
        if data == "value":
            return self._rule_value(kids[0], env)
        raise GrammarSyntaxError(f"unexpected Lark tree node {data!r}", filename=self.filename)

    def _rule_value(self, item: object, env: dict[str, Expr]) -> Expr:
        if isinstance(item, NonTerminal):
            if item.name in env:
                return env[item.name]
            return self._want_rule(item.name)
        if isinstance(item, Terminal):
            return seq(self.ign, self._terminal_ref(item.name))
        if isinstance(item, Tree) and item.data in ("literal", "range"):
            expr = self._term(item)
            self._check_not_empty(_raw(item), expr, item.children[0])
            return seq(self.ign, expr)
        if isinstance(item, Tree) and item.data == "template_usage":
            head, *args = item.children
            return self._instance(head.name, tuple(self._rule(a, env) for a in args), args, env)
        return self._rule(item, env)  # type: ignore[arg-type]

    def _instance(self, name: str, args: tuple[Expr, ...], arg_trees: list[Tree], env: dict[str, Expr]) -> Ref:
        """A reference to the IR rule of template ``name`` applied to ``args`` (created on first use)."""
        if name in env and isinstance(env[name], Ref):
            name = env[name].name  # type: ignore[union-attr]  # a template passed as an argument
        key = (name, args)
        if key in self.instances:
            return Ref(self.instances[key])
        if len(self.instances) >= _MAX_TEMPLATE_INSTANCES:
            raise GrammarSyntaxError(
                f"more than {_MAX_TEMPLATE_INSTANCES} template instances (does template {name} expand forever?)",
                filename=self.filename, rule=name,
            )
        d = self.defs[name]
        shown = f"{name}{{{', '.join(_describe(t) for t in arg_trees)}}}"
        ir_name, k = shown, 1
        while ir_name in self.rules or ir_name in self.instances.values():
            k += 1
            ir_name = f"{shown}#{k}"
        self.instances[key] = ir_name
        self.rules[ir_name] = EPSILON
        self.todo.append((ir_name, d.tree, dict(zip(d.params, args)), name))
        return Ref(ir_name)

    # -- terminals

    def _term(self, tree: Tree) -> Expr:
        """The IR of a terminal tree (its references to other terminals already inlined by Lark)."""
        key = id(tree)
        hit = self.term_memo.get(key)
        if hit is None:
            hit = self._term_uncached(tree)
            self.term_memo[key] = hit
        return hit

    def _term_uncached(self, tree: Tree) -> Expr:
        data = tree.data
        kids = tree.children
        if data == "expansions":
            return alt(*(self._term(k) for k in kids))
        if data == "expansion":
            return self._term_seq(_flatten(kids))
        if data == "maybe":
            return opt(self._term(kids[0]))
        if data == "expr":
            return _apply_op(self._term(kids[0]), kids[1:])
        if data == "value":
            return self._term(kids[0])
        if data == "literal":
            return self._pattern(_literal_to_pattern(kids[0]), kids[0])
        if data == "range":
            lo, hi = (t.value[1:-1] for t in kids)
            return self._pattern(PatternRE(f"[{lo}-{hi}]"), kids[0])
        raise GrammarSyntaxError(f"unexpected Lark tree node {data!r} in a terminal", filename=self.filename)

    def _term_seq(self, items: list[Tree]) -> Expr:
        """A sequence of terminal parts, with Lark's lazy-quantifier idioms read as ``re.match`` does."""
        pats = [_literal_pattern(t) for t in items]
        out: list[Expr] = []
        i = 0
        while i < len(items):
            hit = lazy_idiom(pats, i, lambda p: self._pattern(p))
            if hit is not None:
                out.append(hit[0])
                i += hit[1]
            else:
                out.append(self._term(items[i]))
                i += 1
        return seq(*out)

    def _pattern(self, p: Pattern, token: Token | None = None) -> Expr:
        """The IR of one Lark pattern; regex errors get the place of ``token`` in the grammar."""
        if isinstance(p, PatternStr):
            return literal_to_ir(p.value, ignore_case="i" in p.flags)
        try:
            lazy = lazy_regex(p, lambda q: self._pattern(q, token))
            if lazy is not None:
                return lazy
            return regex_to_ir(p.value, flags="".join(sorted(p.flags)), dialect="python")
        except RegexError as exc:
            line, col = self._token_pos(token)
            raise type(exc)(
                exc.message, pattern=exc.pattern, offset=exc.offset, filename=self.filename, line=line, column=col
            ) from None

    def _token_pos(self, token: Token | None) -> tuple[int | None, int | None]:
        """Where ``token`` is in the top-level grammar text (None for tokens of imported files)."""
        line, col = getattr(token, "line", None), getattr(token, "column", None)
        if not isinstance(line, int) or not isinstance(col, int):
            return None, None
        lines = self.text.splitlines()
        if line > len(lines) or not lines[line - 1][col - 1:].startswith(str(token)):
            return None, None
        return line, col


# ----------------------------------------------------------------------------- helpers


def _apply_op(inner: Expr, op: list[object]) -> Expr:
    """``inner`` with an EBNF operator: ``?``, ``*``, ``+`` or ``~ n`` / ``~ n..m``."""
    sym = str(op[0])
    if sym == "?":
        return opt(inner)
    if sym == "*":
        return star(inner)
    if sym == "+":
        return repeat(inner, 1, None)
    lo = int(str(op[1]))
    hi = int(str(op[2])) if len(op) > 2 else lo
    return repeat(inner, lo, hi)


def _flatten(items: list[Tree]) -> list[Tree]:
    """Splice single-alternative groups and terminal references into the enclosing sequence."""
    out: list[Tree] = []
    for it in items:
        inner = it
        if inner.data == "value" and isinstance(inner.children[0], Tree):
            inner = inner.children[0]
        if inner.data == "expansions" and len(inner.children) == 1 and inner.children[0].data == "expansion":
            out.extend(_flatten(inner.children[0].children))
        else:
            out.append(it)
    return out


def _literal_pattern(tree: Tree) -> Pattern | None:
    """The Lark pattern of a ``value(literal)``/``literal`` tree, or None for anything else."""
    if tree.data == "value" and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    if tree.data == "literal":
        return _literal_to_pattern(tree.children[0])
    return None


def _raw(tree: Tree) -> str:
    return " .. ".join(str(t) for t in tree.children)


def _describe(tree: Tree) -> str:
    """A short name for a template argument, for the instance's rule name."""
    item = tree.children[0] if tree.data == "value" else tree
    if isinstance(item, (NonTerminal, Terminal)):
        return item.name
    if isinstance(item, Tree) and item.data in ("literal", "range"):
        return _raw(item)
    if isinstance(item, Tree) and item.data == "template_usage":
        return f"{item.children[0].name}{{{', '.join(_describe(a) for a in item.children[1:])}}}"
    return "..."


def _nullable(expr: Expr) -> bool:
    """Whether ``expr`` matches the empty string (references count as not nullable)."""
    if isinstance(expr, Bytes):
        return not expr.data
    if isinstance(expr, Seq):
        return all(_nullable(e) for e in expr.items)
    if isinstance(expr, Alt):
        return any(_nullable(e) for e in expr.items)
    if isinstance(expr, Repeat):
        return expr.min == 0 or _nullable(expr.expr)
    return False


def _refs(expr: Expr) -> Iterator[Ref]:
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Ref):
            yield e
        elif isinstance(e, (Seq, Alt)):
            stack.extend(e.items)
        elif isinstance(e, Repeat):
            stack.append(e.expr)
