"""pda.generate: masked decoding, jump-forward with retokenisation, speculative decoding, the CLI.

Models are tiny random Llamas (hidden 64, 2 layers) over DeepSeek's real 129,280-token tokenizer.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import pda  # noqa: E402
from pda import Grammar, grammars  # noqa: E402
from pda.generation import STATS_KEYS, tokenizer_info  # noqa: E402
from pda.models import Biased, ReplayModel, closing_bias, early_exit_draft, random_llama  # noqa: E402
from pda.sampling import Sampler, speculative_accept  # noqa: E402

VOCAB = 129280

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 2},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "day", "tags", "ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def tok(deepseek_tokenizer: Any) -> Any:
    return deepseek_tokenizer


@pytest.fixture(scope="module")
def info(tok: Any) -> Any:
    return tokenizer_info(tok, VOCAB)[0]


@pytest.fixture(scope="module")
def model() -> Any:
    return random_llama(VOCAB, hidden=64, layers=2, seed=0)


@pytest.fixture(scope="module")
def biased(model: Any, info: Any) -> tuple[Any, Any]:
    """The model with a bias toward closing tokens (outputs end), and its early-exit draft."""
    bias = closing_bias(info.token_bytes)
    return Biased(model, bias), Biased(early_exit_draft(model), bias)


def _valid(schema: dict[str, Any], text: str) -> bool:
    jsonschema = pytest.importorskip("jsonschema")
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return not list(v.iter_errors(json.loads(text)))


def test_import_pda_loads_no_model_machinery() -> None:
    code = "import sys, pda; assert 'transformers' not in sys.modules; assert callable(pda.generate); " \
           "assert 'pda.generation' in sys.modules; print(pda.GenerationResult.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "GenerationResult", out.stderr


@pytest.mark.parametrize("seed", [0, 1])
def test_schema_outputs_validate_with_jump_forward_and_speculation(tok: Any, biased: tuple[Any, Any],
                                                                   seed: int) -> None:
    target, draft = biased
    r = pda.generate(target, tok, SCHEMA, "A person:", seed=seed, max_new_tokens=200, draft_model=draft)
    assert set(STATS_KEYS) <= set(r.stats)
    assert r.complete, r.stats
    assert _valid(SCHEMA, r.text), r.text
    assert r.stats["jump_forward_tokens"] > 0 and r.stats["draft_proposed"] > 0
    assert r.stats["forward_passes"] < r.stats["tokens"]
    assert tok.decode(r.token_ids) == r.text


@pytest.mark.parametrize("name", [p.name for p in grammars.files()])
def test_every_bundled_grammar_gives_accepted_output(tok: Any, biased: tuple[Any, Any], name: str) -> None:
    target, draft = biased
    g = Grammar.from_file(grammars.DIRECTORY / name)
    r = pda.generate(target, tok, g, "x", seed=0, max_new_tokens=32, draft_model=draft)
    assert g.is_prefix(r.text)
    assert not r.complete or g.accepts(r.text), r.text


def test_sampling_is_seeded_and_reproducible(tok: Any, biased: tuple[Any, Any]) -> None:
    target, draft = biased
    runs = [pda.generate(target, tok, SCHEMA, "x", seed=s, max_new_tokens=80, draft_model=draft)
            for s in (5, 5, 6)]
    assert runs[0].token_ids == runs[1].token_ids
    assert runs[0].token_ids != runs[2].token_ids


def test_jump_forward_retokenises_text_that_ends_mid_token(tok: Any, model: Any) -> None:
    """``{"name": "`` is forced at the start: the model sees the tokenizer's own ``{"``, ``name``,
    ``":`` and picks the token that starts with `` "`` itself (it may run on into the name)."""
    g = Grammar.from_ebnf('root ::= "{\\"name\\": \\"" [a-z]+ "\\"}"')
    r = pda.generate(model, tok, g, "x", seed=0, max_new_tokens=40)
    head = tok.encode('{"name":', add_special_tokens=False)
    assert r.token_ids[: len(head)] == head
    assert tok.convert_ids_to_tokens(r.token_ids[len(head)]).startswith('Ġ"')  # byte-level BPE's space
    assert r.stats["jump_forward_tokens"] >= len(head)
    assert g.is_prefix(r.text) and (not r.complete or g.accepts(r.text))


def test_jump_forward_retokenises_text_that_begins_mid_token(tok: Any, model: Any, info: Any) -> None:
    """After a sampled ``pre`` the grammar forces ``fix;``: the output is the single token
    ``prefix``, as the tokenizer writes it, not ``pre`` + ``fix``."""
    bias = torch.zeros(VOCAB)
    bias[info.token_bytes.index(b"pre")] = 60.0
    g = Grammar.from_ebnf('root ::= ("pre" | "con") "fix;"')
    r = pda.generate(Biased(model, bias), tok, g, "x", seed=0)
    assert r.text == "prefix;" and r.complete
    assert r.token_ids == tok.encode("prefix;", add_special_tokens=False)
    assert r.stats["forward_passes"] == 1  # the prompt's; ';' is forced and the grammar ends there


def test_jump_forward_after_a_partial_utf8_token(tok: Any, model: Any, info: Any) -> None:
    """The model samples the lone byte 0xE6 (the start of 日 and of 月); once the character is
    complete, the forced ``本語です`` is encoded together with it, so no partial token is left."""
    bias = torch.zeros(VOCAB)
    bias[info.token_bytes.index(b"\xe6")] = 60.0
    g = Grammar.from_ebnf('root ::= ("日" | "月") "本語です"')
    r = pda.generate(Biased(model, bias), tok, g, "x", seed=0)
    assert r.complete and r.text in ("日本語です", "月本語です")
    for t in r.token_ids:
        info.token_bytes[t].decode("utf-8")  # every token a whole character sequence
    assert r.token_ids[0] == tok.encode(r.text[0] + "本語", add_special_tokens=False)[0]


def test_forced_text_reaching_the_end_of_the_grammar(tok: Any, model: Any) -> None:
    g = Grammar.from_ebnf('root ::= ("abc" | "xyz") "!!! done"')
    r = pda.generate(model, tok, g, "x", seed=0)
    assert r.complete and r.stats["stopped_by"] == "end_of_grammar"
    assert r.text in ("abc!!! done", "xyz!!! done")
    assert r.token_ids == tok.encode(r.text, add_special_tokens=False)
    assert r.stats["forward_passes"] == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_jump_forward_every_token_costs_one_pass(tok: Any, biased: tuple[Any, Any], seed: int) -> None:
    """``jump_forward=False`` is a standard constrained decoder: one target pass per output token,
    forced or not, and one for the stop token; jump-forward needs fewer on the same schema (its
    keys, quotes and colons are forced)."""
    target, _ = biased
    plain = pda.generate(target, tok, SCHEMA, "A person:", seed=seed, max_new_tokens=200, jump_forward=False)
    s = plain.stats
    assert plain.complete and _valid(SCHEMA, plain.text), plain.text
    assert s["stopped_by"] == "stop_token"
    assert s["jump_forward_tokens"] == 0 and s["sampled_tokens"] == s["tokens"]
    assert s["forward_passes"] == s["tokens"] + 1
    jf = pda.generate(target, tok, SCHEMA, "A person:", seed=seed, max_new_tokens=200)
    assert jf.complete and _valid(SCHEMA, jf.text), jf.text
    assert jf.stats["jump_forward_tokens"] >= 8  # '{"name":"' ... at least the keys
    assert jf.stats["forward_passes"] < 0.8 * (jf.stats["tokens"] + 1)


def test_without_jump_forward_a_token_the_mask_forces_still_costs_a_pass(tok: Any, model: Any) -> None:
    """The grammar forces ``;`` (one token) after the sampled word and then ends: without
    jump-forward both it and the stop token come from forward passes; with it, neither does."""
    g = Grammar.from_ebnf('root ::= ("abc" | "xyz") ";"')
    plain = pda.generate(model, tok, g, "x", seed=0, jump_forward=False)
    assert plain.complete and plain.text in ("abc;", "xyz;")
    assert plain.stats["forward_passes"] == plain.stats["tokens"] + 1 == 3
    assert plain.stats["stopped_by"] == "stop_token" and plain.stats["jump_forward_tokens"] == 0
    jf = pda.generate(model, tok, g, "x", seed=0)
    assert jf.complete and jf.stats["forward_passes"] == 1 and jf.stats["stopped_by"] == "end_of_grammar"
    cut = pda.generate(model, tok, g, "x", seed=0, jump_forward=False, max_new_tokens=1)
    assert not cut.complete and cut.stats["forward_passes"] == cut.stats["tokens"] == 1


def test_replay_model_writes_its_document_and_jump_forward_skips_the_forced_part(tok: Any, info: Any) -> None:
    """The replay model (a trained model's stand-in for one document) makes greedy decoding write
    the document in the tokenizer's own tokens: one pass per token and one for the stop token
    without jump-forward, fewer with it (keys, quotes, the '-' of the date are forced), same text."""
    doc = '{"name":"Ann","age":42,"day":"2024-02-29","tags":["red","blue"],"ok":true}'
    prompt = tok.encode("x", add_special_tokens=True)
    canonical = tok.encode(doc, add_special_tokens=False)
    model = ReplayModel(info.token_bytes, doc, prompt, canonical, tok.eos_token_id, info.special_token_ids)
    plain = pda.generate(model, tok, SCHEMA, prompt, greedy=True, jump_forward=False)
    assert plain.text == doc and plain.token_ids == canonical and plain.stats["stopped_by"] == "stop_token"
    assert plain.stats["forward_passes"] == len(canonical) + 1
    jf = pda.generate(model, tok, SCHEMA, prompt, greedy=True)
    assert jf.text == doc and jf.complete
    assert jf.stats["forward_passes"] < 0.6 * plain.stats["forward_passes"]
    with pytest.raises(pda.PdaError):
        ReplayModel(info.token_bytes, doc + " ", prompt, canonical, tok.eos_token_id)


def test_max_new_tokens_gives_an_incomplete_prefix(tok: Any, model: Any) -> None:
    g = Grammar.from_ebnf('root ::= "[" [a-z]+ "]"')
    r = pda.generate(model, tok, g, "x", seed=0, max_new_tokens=3)
    assert r.stats["tokens"] <= 3 and not r.complete and g.is_prefix(r.text)


def _builtin(name: str) -> Grammar:
    return Grammar.from_file(grammars.path(name))


@pytest.mark.parametrize("jump_forward", [True, False])
@pytest.mark.parametrize("name", ["schema", "sql_select", "json"])
def test_greedy_speculative_equals_greedy(tok: Any, biased: tuple[Any, Any], name: str, jump_forward: bool) -> None:
    target, draft = biased
    g: Any = SCHEMA if name == "schema" else _builtin(name)
    plain = pda.generate(target, tok, g, "x", greedy=True, max_new_tokens=48, jump_forward=jump_forward)
    for d in (draft, target):
        spec = pda.generate(target, tok, g, "x", greedy=True, max_new_tokens=48, draft_model=d, draft_tokens=4,
                            jump_forward=jump_forward)
        assert spec.token_ids == plain.token_ids
        assert spec.stats["forward_passes"] <= plain.stats["forward_passes"]
        assert spec.stats["jump_forward_tokens"] == 0 or jump_forward
    # the target as its own draft: every proposal is kept, about one target pass per 5 tokens
    assert spec.stats["draft_accepted"] == spec.stats["draft_proposed"]
    assert spec.stats["forward_passes"] <= 0.5 * spec.stats["tokens"] + 1


def test_speculative_accept_follows_the_target_distribution() -> None:
    """The acceptance rule on masked distributions (zeros where the grammar forbids): the tokens
    it returns follow p, whatever q is (chi-square, 8 cells, 20,000 draws)."""
    sampler = Sampler(temperature=1.0, top_p=1.0, greedy=False, seed=0)
    p = torch.tensor([0.30, 0.0, 0.25, 0.05, 0.15, 0.0, 0.20, 0.05])
    q = torch.tensor([0.05, 0.0, 0.50, 0.20, 0.05, 0.0, 0.0, 0.20])
    counts = torch.zeros(8)
    n = 20000
    for _ in range(n):
        d = sampler.draw(q)
        _, t = speculative_accept(p, q, d, sampler)
        counts[t] += 1
    assert counts[1] == counts[5] == 0
    support = p > 0
    chi2 = float((((counts - n * p) ** 2)[support] / (n * p[support])).sum())
    assert chi2 < 22.5, (chi2, counts / n)  # 5 degrees of freedom, p = 0.0004


def test_speculative_sampling_matches_the_masked_target_at_a_fixed_state(tok: Any, info: Any) -> None:
    """End to end: the first token of ``pda.generate`` with a (different, peaked) draft follows the
    target's masked distribution at the start state."""
    target = random_llama(VOCAB, hidden=64, layers=1, seed=1, logit_scale=40.0)
    draft = random_llama(VOCAB, hidden=64, layers=1, seed=2, logit_scale=40.0)
    _, compiler = tokenizer_info(tok, VOCAB)
    compiled = compiler.compile_regex("[a-f][a-z]{2}")
    ids = tok.encode("x", add_special_tokens=True)
    with torch.no_grad():
        logits = target(torch.tensor([ids])).logits[0, -1].float()
    sampler = Sampler(temperature=1.0, top_p=1.0, greedy=False, seed=0)
    mask = pda.allocate_token_bitmask(1, VOCAB)
    pda.GrammarMatcher(compiled).fill_next_token_bitmask(mask, 0)
    p = sampler.probs(sampler.masked(logits, mask[0]))
    top = torch.argsort(p, descending=True)[:3].tolist()
    assert float(p[top].sum()) > 0.5
    counts = dict.fromkeys(top + [-1], 0)
    n = 150
    for seed in range(n):
        r = pda.generate(target, tok, compiled, ids, seed=seed, max_new_tokens=1, draft_model=draft, draft_tokens=2,
                         jump_forward=False)
        t = r.token_ids[0]
        counts[t if t in counts else -1] += 1
    expected = {t: n * float(p[t]) for t in top}
    expected[-1] = n - sum(expected.values())
    cells = [t for t in counts if expected[t] >= 5]
    chi2 = sum((counts[t] - expected[t]) ** 2 / expected[t] for t in cells)
    assert chi2 < 16.3, (chi2, counts, expected)  # <= 3 degrees of freedom, p = 0.001


def test_cli_generate_prints_text_and_stats(tmp_path: Any, tok: Any, model: Any) -> None:
    folder = tmp_path / "m"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    cmd = [sys.executable, "-m", "pda", "generate", "--model", str(folder), "--regex", "[a-c]{3}-[0-9]{2}",
           "--seed", "3", "--stats", "--draft-model", str(folder), "--draft-tokens", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(r"[a-c]{3}-[0-9]{2}", out.stdout)
    stats = json.loads(out.stderr.strip().splitlines()[-1])
    assert set(STATS_KEYS) <= set(stats) and stats["complete"] is True
    assert stats["draft_accepted"] == stats["draft_proposed"]  # its own draft
    bad = subprocess.run([sys.executable, "-m", "pda", "generate", "--model", str(tmp_path), "--regex", "a"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "not a Hugging Face model folder" in bad.stderr
