"""How long an API server takes to tokenise a prompt: HF ``tokenizers`` timed on this machine.

    pip install tokenizers    # or: pip install -e ".[bench]"
    python bench/tokenize_speed.py [--vocab 32000,128000,200000] [--tokens 1024,4096,8192]
        [--corpus-mb 40]

vLLM, SGLang and TensorRT-LLM take a prompt as text and tokenise it with the model's Hugging
Face fast tokenizer (Rust) before the request reaches the engine's scheduler: latency every
request pays, which the engine presets carry as ``tokenize_us_per_prompt_token``. No model's
tokenizer file can be fetched here, so this bench trains byte-level BPE tokenizers of the
usual vocabulary sizes the way those models' are built (the GPT-4 / Llama-3 pre-tokenisation
regex, then byte-level BPE), on the Python sources of the running environment (``--corpus-mb``
of text, a fixed order: deterministic), and times ``Tokenizer.encode`` on one thread, best of
three passes over 20 prompts of each length, for two kinds of prompt:

- natural text: slices of the corpus (aiperf, aiconfigurator's client, sends text from a corpus);
- random ids, as InferenceX's client builds them (``kimbochen/bench_serving`` and
  ``utils/bench_serving``: consecutive token ids from a random offset, decoded, re-encoded, cut
  to the sampled length and decoded again), whose long unbroken words make BPE slower per token.

It prints µs per prompt token. What it cannot say: how fast the serving hosts' cores are
against this machine's, or how a particular model's tokenizer (its vocabulary, its regex)
differs from these; the Python wrapper a server calls adds its own (small) cost on top.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

#: The GPT-4 (cl100k) / Llama-3 pre-tokenisation pattern the trained tokenizers split with.
_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_PROMPTS = 20


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", default="32000,128000,200000", help="vocabulary sizes")
    parser.add_argument("--tokens", default="1024,4096,8192", help="prompt lengths, tokens")
    parser.add_argument("--corpus-mb", type=float, default=40.0)
    return parser.parse_args(argv)


def _corpus(megabytes: float) -> str:
    """The first ``megabytes`` of text of this environment's Python sources, in path order."""
    root = Path(sys.modules["argparse"].__file__ or "").parent.parent
    chunks, size = [], 0
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        chunks.append(text)
        size += len(text)
        if size >= megabytes * 1e6:
            break
    return "\n".join(chunks)


def _best_seconds(encode: object, prompts: list[str]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for prompt in prompts:
            encode(prompt)  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:  # an optional dependency (the bench extra): imported where it is needed
        from tokenizers import (  # noqa: PLC0415
            Regex,
            Tokenizer,
            decoders,
            models,
            pre_tokenizers,
            trainers,
        )
    except ImportError:
        print("bench/tokenize_speed.py needs the tokenizers package: pip install tokenizers",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        vocabs = [int(v) for v in args.vocab.split(",")]
        lengths = [int(n) for n in args.tokens.split(",")]
    except ValueError:
        print("--vocab and --tokens take comma-separated integers", file=sys.stderr)
        return 2
    text = _corpus(args.corpus_mb)
    print(f"corpus: {len(text) / 1e6:.1f} M characters of Python sources")
    for vocab in vocabs:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator([text[i : i + 1_000_000] for i in range(0, len(text), 1_000_000)],
                                trainer)  # fmt: skip
        size = tok.get_vocab_size()
        rng = random.Random(0)
        for n in lengths:
            natural = []
            for k in range(_PROMPTS):
                start = (k + 1) * len(text) // (_PROMPTS + 2)
                natural.append(tok.decode(tok.encode(text[start : start + 12 * n]).ids[:n]))
            ids_prompts = []
            for k in range(_PROMPTS):
                offset = rng.randrange(size)
                ids = [(offset + k + j) % size for j in range(n)]
                ids_prompts.append(tok.decode(tok.encode(tok.decode(ids)).ids[:n]))
            for kind, prompts in (("natural text", natural), ("random ids", ids_prompts)):
                tokens = sum(len(tok.encode(p).ids) for p in prompts)
                seconds = _best_seconds(tok.encode, prompts)
                print(
                    f"vocab {size:7,d}  {n:6,d} tokens  {kind:12s}  "
                    f"{seconds / tokens * 1e6:5.2f} µs/token  "
                    f"{seconds / len(prompts) * 1e3:6.2f} ms/prompt"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
