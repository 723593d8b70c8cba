"""Sample documents for llama.cpp's example grammars in ``../shared/corpora/gbnf``.

The corpus ships the grammars (``arithmetic``, ``c``, ``english``, ``japanese``, ``list``) without
documents, so the mask benchmarks step through the hand-written samples below, plus a few seeded
``arithmetic`` and ``list`` documents.  :func:`gbnf_cases` checks every document with
``pda.Grammar.from_ebnf(text).accepts`` and raises ``ValueError`` naming the first one refused.
"""

from __future__ import annotations

import random
from common import corpora_dir

import pda

GBNF_DIR = corpora_dir() / "gbnf"
NAMES = ("arithmetic", "c", "english", "japanese", "list")

SAMPLES: dict[str, list[str]] = {
    "arithmetic": [
        "1+2= 3\n",
        "x = 7\ny1 +20 *3 = 67\n",
        "(a+b)*c= (c*a+c*b)\ntotal_sum /4 -12 = avg\n",
        "( price *3)+tax = 42\n(1+(2*3))-4 = 3\nspeed*time= distance\n",
    ],
    "c": [
        "int main(){int x = 5;while(x<10){x = x+1;}return x;}",
        "float area(float r){return 3*r*r;}int square(int n){return n*n;}",
        "int sum(int n){int total = 0;for(int i = 0; i<n; i = i+1){total = total+i;}return total;}",
        "char pick(int k){// choose a letter\nif(k==0){return 97;}else{return 98;}}",
        "int f(){/* a comment, with * stars */printf (x, y+2, ( a-b ));return -x;}",
    ],
    "english": [
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "It was 1999: prices rose by 3.5% (or so) and nobody cared.\nThe end.",
        "Grammars constrain what a model may write; tokens outside the mask are never sampled.",
    ],
    "japanese": [
        "こんにちは、世界。",
        "今日は良い天気です。",
        "コンピュータは文法に従って文章を書きます。\n次の行です。",
        "吾輩は猫である。名前はまだ無い。",
    ],
    "list": [
        "- apples\n- pears\n",
        "- buy milk\n- call Alice at 5pm\n- write the report (draft 2)\n",
        "- 東京\n- café au lait\n- ok\n",
    ],
}

_WORDS = ["alpha", "beta", "gamma", "delta", "x", "y2", "rate", "n_items", "total"]


def _arith_term(rng: random.Random, depth: int) -> str:
    kind = rng.random()
    if depth < 3 and kind < 0.2:
        return "(" + rng.choice(["", " "]) + _arith_expr(rng, depth + 1) + ")" + rng.choice(["", " "])
    if kind < 0.6:
        return str(rng.randint(0, 9999)) + rng.choice(["", " "])
    return rng.choice(_WORDS) + rng.choice(["", " "])


def _arith_expr(rng: random.Random, depth: int) -> str:
    parts = [_arith_term(rng, depth)]
    for _ in range(rng.randint(0, 4)):
        parts.append(rng.choice("+-*/") + _arith_term(rng, depth))
    return "".join(parts)


def generated(name: str, count: int, seed: int) -> list[str]:
    """``count`` seeded documents for ``arithmetic`` or ``list`` (none for the other grammars)."""
    rng = random.Random(f"{name}-{seed}")
    docs = []
    for _ in range(count if name in ("arithmetic", "list") else 0):
        if name == "arithmetic":
            docs.append("".join(_arith_expr(rng, 0) + "=" + rng.choice(["", " "]) + _arith_term(rng, 3) + "\n"
                                for _ in range(rng.randint(2, 8))))
        else:
            docs.append("".join("- " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 8))) + "\n"
                                for _ in range(rng.randint(2, 10))))
    return docs


def gbnf_cases(count: int = 4, seed: int = 0) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(name, gbnf text, [(label, document)])`` for each llama.cpp grammar, every document checked
    with pda's grammar."""
    out = []
    for name in NAMES:
        text = (GBNF_DIR / f"{name}.gbnf").read_text(encoding="utf-8")
        docs = [(f"{name}-{i}", d) for i, d in enumerate(SAMPLES[name])]
        docs += [(f"{name}-gen{i}", d) for i, d in enumerate(generated(name, count, seed))]
        grammar = pda.Grammar.from_ebnf(text)
        for label, doc in docs:
            if not grammar.accepts(doc):
                raise ValueError(f"{name}.gbnf does not accept its sample {label}: {doc[:80]!r}")
        out.append((name, text, docs))
    return out
