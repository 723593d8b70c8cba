"""``pda generate``: constrained generation with a local Hugging Face model from the command line.

    pda generate --model DIR --schema person.schema.json --prompt "A person:" --seed 0 --stats
    pda generate --model DIR --builtin sql_select --greedy --draft-model DRAFT_DIR --draft-tokens 4
    pda generate --model DIR --regex '[0-9]{3}-[0-9]{4}' --no-jump-forward

The generated text goes to stdout (exactly the text; a newline follows only on a terminal).  With
``--stats``, one JSON line on stderr holds :data:`pda.generation.STATS_KEYS` and more.  Exit
status 0 after generating (whether the output is complete is the ``complete`` stat), 2 when the
grammar, schema or model cannot be loaded.  A JSON Schema is compiled with compact whitespace (no
blanks between tokens: the text jump-forward can skip), unless ``--whitespace flexible``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from pda import grammars
from pda.errors import PdaError

__all__ = ["add_generate_parser", "run_generate"]

_DIALECTS = {".gbnf": "ebnf", ".ebnf": "ebnf", ".lark": "lark", ".regex": "regex"}


def add_generate_parser(sub: Any) -> None:
    """Add the ``generate`` subcommand to the ``pda`` subparsers ``sub``."""
    gen = sub.add_parser(
        "generate", help="generate text a grammar accepts with a local Hugging Face model",
        description="Generate text that a grammar accepts with a local Hugging Face causal LM "
                    "(every step masked; jump-forward and speculative decoding).",
    )
    gen.add_argument("--model", "-m", required=True, metavar="DIR", help="local Hugging Face model folder")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema", metavar="FILE", help="a JSON Schema (JSON file)")
    source.add_argument("--grammar", "-g", metavar="FILE", help="grammar file (.gbnf, .ebnf, .lark, .regex)")
    source.add_argument("--lark", metavar="FILE", help="a Lark grammar file")
    source.add_argument("--regex", "-r", metavar="PATTERN", help="a regular expression the whole output matches")
    source.add_argument("--builtin", "-b", metavar="NAME", help="a bundled grammar (see `pda list`)")
    gen.add_argument("--start", "-s", metavar="RULE", help="start rule (default: root for EBNF, start for Lark)")
    gen.add_argument("--whitespace", choices=["compact", "flexible"], default="compact",
                     help="layout of --schema output (default compact)")
    gen.add_argument("--prompt", "-p", default="", help="prompt text (default: empty, the bos token)")
    gen.add_argument("--max-new-tokens", type=int, default=256, metavar="N")
    gen.add_argument("--seed", type=int, default=None, metavar="N")
    gen.add_argument("--temperature", type=float, default=1.0, metavar="T")
    gen.add_argument("--top-p", type=float, default=1.0, metavar="P")
    gen.add_argument("--greedy", action="store_true", help="argmax of the masked logits instead of sampling")
    gen.add_argument("--no-jump-forward", action="store_true", help="decode token by token: one forward pass per output token, forced or not")
    gen.add_argument("--draft-model", metavar="DIR", help="draft model folder for speculative decoding")
    gen.add_argument("--draft-tokens", type=int, default=4, metavar="K", help="draft proposals per round (4)")
    gen.add_argument("--device", default="auto", help="torch device (default: cuda when available, else cpu)")
    gen.add_argument("--stats", action="store_true", help="one JSON line of statistics on stderr")


def _grammar(args: argparse.Namespace) -> Any:
    """The Grammar (or JSON Schema dict) the arguments name; PdaError/OSError on failure."""
    from pda import Grammar

    if args.schema is not None:
        if args.start is not None:
            raise PdaError("--start does not apply to --schema")
        return Grammar.from_json_schema(Path(args.schema).read_text(encoding="utf-8"), whitespace=args.whitespace)
    if args.regex is not None:
        return Grammar.from_regex(args.regex)
    if args.lark is not None:
        path, dialect = Path(args.lark), "lark"
    else:
        path = grammars.path(args.builtin) if args.builtin is not None else Path(args.grammar)
        dialect = _DIALECTS.get(path.suffix.lower())  # type: ignore[assignment]
        if dialect is None:
            raise PdaError(f"cannot tell the dialect of {path} from its suffix (.gbnf, .ebnf, .lark, .regex)")
    return Grammar.from_file(path, start=args.start, format=dialect)


def _load_model(folder: str, device: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not Path(folder, "config.json").is_file():
        raise PdaError(f"{folder} is not a Hugging Face model folder (no config.json)")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(folder).to(device).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def run_generate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``pda generate``; returns the exit status (0, or 2 when something cannot be loaded)."""
    from pda.generation import generate

    try:
        if args.max_new_tokens < 0 or args.draft_tokens < 0:
            raise PdaError("--max-new-tokens and --draft-tokens must be >= 0")
        grammar = _grammar(args)
        model, tokenizer = _load_model(args.model, args.device)
        draft = _load_model(args.draft_model, args.device)[0] if args.draft_model else None
    except (PdaError, KeyError, OSError, ValueError, UnicodeDecodeError) as exc:
        print(f"pda: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=err)
        return 2
    result = generate(model, tokenizer, grammar, args.prompt, max_new_tokens=args.max_new_tokens,
                      temperature=args.temperature, top_p=args.top_p, greedy=args.greedy, seed=args.seed,
                      jump_forward=not args.no_jump_forward, draft_model=draft, draft_tokens=args.draft_tokens)
    out.write(result.text)
    if out.isatty():
        out.write("\n")
    out.flush()
    if args.stats:
        print(json.dumps(result.stats), file=err)
    return 0


