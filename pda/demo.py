"""``pda demo``'s main part: constrained generation with a random Llama over DeepSeek's tokenizer.

The first run builds the model (hidden 128, head dim 64, 4 layers, 129,280-token vocabulary) and an
early-exit draft (its first layer) and saves both under ``.cache/demo-model`` in the working
directory; later runs load them.  For JSON (the bundled ``schemas/user_profile.json``) and SQL (the
bundled ``sql_select`` grammar) it generates with jump-forward, and with jump-forward plus speculative
decoding, and prints each text, whether it validates (``jsonschema`` with format checking for
JSON, the grammar for SQL), the tokens, the target's forward passes and those saved against
token-by-token decoding of the same tokens (one pass per token), and the mask time per token.  The model
is random: it knows nothing of JSON or SQL, so every well-formed output is the grammar's doing.  Its
logits get a fixed bias (:class:`pda.models.Biased`, :func:`pda.models.closing_bias`: toward
tokens that close values), so that strings and queries end after a few tokens as a trained
model's do.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TextIO

from pda import Grammar, grammars

__all__ = ["run_generation_demo", "DEMO_CACHE"]

DEMO_CACHE = Path(".cache") / "demo-model"
"""Where the demo's models are cached, relative to the working directory (ignored by git)."""

_MODES = (("jump-forward", {}), ("jump-forward + speculation", {"draft": True}))


def _schema_check(schema: dict[str, Any]) -> Any:
    """A function text -> error message or None: jsonschema with format checking when installed."""
    try:
        import jsonschema
    except ImportError:
        return lambda text: None
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    def check(text: str) -> str | None:
        try:
            errors = sorted(validator.iter_errors(json.loads(text)), key=str)
        except ValueError as exc:
            return f"not JSON: {exc}"
        return errors[0].message if errors else None

    return check


def run_generation_demo(out: TextIO, *, cache: Path = DEMO_CACHE, seed: int = 0, hidden: int = 128,
                        layers: int = 4) -> bool:
    """Print the generation demo to ``out``; True when every complete output validated.  ``hidden``
    and ``layers`` size the model built on first use (the tests build a smaller one)."""
    import pda
    from pda.generation import tokenizer_info
    from pda.models import Biased, cached_models, closing_bias

    t0 = time.perf_counter()
    built = not any(cache.glob("built-*"))
    target, draft, tokenizer = cached_models(cache, hidden=hidden, layers=layers)
    params = sum(p.numel() for p in target.parameters())
    bias = closing_bias(tokenizer_info(tokenizer, target.config.vocab_size)[0].token_bytes)
    target, draft = Biased(target, bias), Biased(draft, bias)
    print(f"model: random Llama, {params / 1e6:.1f}M parameters, {target.config.num_hidden_layers} layers, "
          f"head dim 64, DeepSeek's {len(tokenizer):,}-token tokenizer ({'built and cached in' if built else 'loaded from'}"
          f" {cache}, {time.perf_counter() - t0:.1f} s); draft: its first layer (early exit); both with a logit "
          f"bias toward tokens that end values (quotes, brackets, commas, ';', FROM/WHERE/LIMIT), so that outputs "
          f"end as a trained model's would", file=out)
    schema_path = Path(grammars.DIRECTORY) / "schemas" / "user_profile.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    sql = Grammar.from_file(grammars.path("sql_select"))
    jobs = [
        (f"JSON for {schema_path.name}", schema, "A user profile as JSON:\n", _schema_check(schema)),
        ("SQL for sql_select.gbnf", sql, "An SQL query:\n", lambda text: None if sql.accepts(text) else "rejected"),
    ]
    ok = True
    for title, grammar, prompt, check in jobs:
        print(f"\n== {title}", file=out)
        for mode, options in _MODES:
            result = pda.generate(target, tokenizer, grammar, prompt, seed=seed, max_new_tokens=200,
                                  jump_forward=options.get("jump_forward", True),
                                  draft_model=draft if options.get("draft") else None)
            s = result.stats
            problem = check(result.text) if result.complete else "incomplete (max_new_tokens)"
            ok = ok and (problem is None or not result.complete)
            verdict = "validates" if problem is None else f"DOES NOT VALIDATE: {problem}"
            plain = s["tokens"] + int(s["complete"])  # one pass per token, and one for the stop token
            per_token = s["forward_passes"] / max(1, s["tokens"])
            spec = (f", draft {s['draft_accepted']}/{s['draft_proposed']} accepted in {s['draft_forward_passes']} "
                    f"draft passes" if options.get("draft") else "")
            print(f"-- {mode}: {verdict}", file=out)
            print(f"   {result.text}", file=out)
            print(f"   {s['tokens']} tokens ({s['jump_forward_tokens']} jump-forward), {s['forward_passes']} target "
                  f"forward passes = {per_token:.2f} per token "
                  f"(token-by-token decoding: {plain}; {plain - s['forward_passes']} saved){spec}; "
                  f"mask {s['mask_us_mean'] / 1000:.2f} ms per token; {s['wall_s']:.2f} s", file=out)
    print("\nevery complete output validated" if ok else "\nSOME OUTPUT DID NOT VALIDATE", file=out)
    return ok
