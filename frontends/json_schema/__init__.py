"""JSON Schema → grammar IR (what is enforced, and how exactly: :mod:`.compiler`).

The map, the leaf first: a module imports only modules listed before it (never one after it, and
never inside a function), so the subpackage reads from the top of this table down:

==============  ==============================================================================
``document``    the leaf: :class:`~.document.Loc` (a schema and its JSON pointer), the keyword
                tables, the ``$id``/``$anchor`` index, ``$ref`` resolution, draft differences
``strings``     the JSON spellings of decoded strings (escapes, surrogate pairs)
``numbers``     exact languages of number texts: bounds, ``multipleOf``, ``integer``
``formats``     ``format`` as regular expressions (dates, times, hostnames, e-mail, URIs ...)
``merge``       a conjunction of schema objects (``allOf`` and siblings) folded into one
                :class:`~.merge.Merged` set of per-type constraints
``layout``      where whitespace goes (``flexible``, ``compact``, an indent)
``context``     :class:`~.context.Context`: options, rules, caches, and the few recursive
                operations the layers below the compiler may ask for
``patterns``    string languages: ``pattern``/``format``/lengths combined, as IR or automata
``values``      checking one JSON value against a :class:`~.merge.Merged` (``enum``, ``const``)
``disjoint``    ``oneOf`` as a plain union where its branches are provably disjoint
``negate``      complements, for ``not`` and the ``if`` of ``if``/``then``/``else``
``objects``     objects: member order, undeclared names, ``property_order="any"``
``emit``        the dispatch by type; numbers, arrays and literal values
``tidy``        the last whole-grammar pass (single-use rules inlined)
``compiler``    the entry points and :class:`~.compiler.Compiler`: expansion of ``$ref``,
                ``allOf``/``anyOf``/``oneOf``/``not``/``if``/dependencies into conjunctions
==============  ==============================================================================

The general code-point automata (intersection, complement, back to IR) are
:mod:`pda.codepoint_fsm`, beside the byte automata of :mod:`pda.fsm`.

Where a new keyword goes:

* an assertion about one type (like ``minLength``): add it to ``MERGE_KEYWORDS`` in
  :mod:`.document`, fold it into :class:`~.merge.Merged` in :mod:`.merge`, enforce it where that
  type is written (:mod:`.patterns`, :mod:`.emit`, :mod:`.objects`), check it on values in
  :mod:`.values`, and give its complement in :mod:`.negate` (or refuse it there);
* an applicator that combines schemas in place (like ``allOf``): add it to ``COMBINATORS`` in
  :mod:`.document` (and to ``SUBSCHEMA_*`` when it holds sub-schemas) and expand it in
  :meth:`.compiler.Compiler.expand`;
* a ``format``: a regular expression in :mod:`.formats`.
"""

from .compiler import MAX_INDENT_DEPTH, json_any_ir, json_schema_to_ebnf, json_schema_to_ir

__all__ = ["json_schema_to_ir", "json_schema_to_ebnf", "json_any_ir", "MAX_INDENT_DEPTH"]
