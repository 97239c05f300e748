"""The answer-set task of the TRL testbed: one-token prompts, one-token answers, 0/1 reward.

Vocabulary (word level, built with ``tokenizers``; nothing is downloaded): four special tokens,
``n_prompts`` prompt tokens ``q0 .. q{P-1}`` and ``n_answers`` answer tokens ``a0 .. a{V-1}``. Prompt
``q`` is rewarded 1 when the single completion token is one of its allowed answers. Because the
answer is one token sampled from ``softmax(logits / temperature)`` over the whole vocabulary (TRL
samples with ``top_k=0``, ``top_p=1``), the pass rate of every prompt is known EXACTLY from one
forward pass: the softmax mass on its allowed set (:meth:`AnswerSetTask.pass_rates`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass

import numpy as np

from bayesgrpo.errors import OptionError
from bayesgrpo.testbed.trl.config import SPECIAL_TOKENS, TRLRunConfig

__all__ = ["AnswerSetTask", "require_trl"]

PROMPT_PREFIX, ANSWER_PREFIX = "q", "a"


def _available(mod: str) -> bool:
    if mod in sys.modules:  # imported already (None: blocked)
        return sys.modules[mod] is not None
    return importlib.util.find_spec(mod) is not None


def require_trl() -> None:
    """Fail with one line when torch / transformers / trl (the ``[trl]`` extra) are missing."""
    missing = [m for m in ("torch", "transformers", "trl", "datasets", "tokenizers") if not _available(m)]
    if missing:
        raise OptionError(
            f"the TRL testbed needs {', '.join(missing)}: install the optional extra with pip install 'bayesgrpo[trl]'"
        )
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(k, "1")  # nothing may download
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class AnswerSetTask:
    """Prompts, allowed answer sets and vocabulary of one ``task_seed`` (numpy; no torch needed).

    Attributes
    ----------
    sizes : ndarray [P]
        Allowed-set size of every prompt (its difficulty).
    allowed : tuple of tuple of int
        The allowed answer indices (0..n_answers-1) of every prompt.
    """

    n_prompts: int
    n_answers: int
    sizes: np.ndarray
    allowed: tuple[tuple[int, ...], ...]

    @classmethod
    def from_config(cls, cfg: TRLRunConfig) -> AnswerSetTask:
        rng = np.random.default_rng(cfg.task_seed)
        sizes = np.array([cfg.allowed_sizes[q % len(cfg.allowed_sizes)] for q in range(cfg.n_prompts)])
        allowed = tuple(tuple(sorted(rng.choice(cfg.n_answers, size=int(k), replace=False).tolist())) for k in sizes)
        return cls(cfg.n_prompts, cfg.n_answers, sizes, allowed)

    # ------------------------------------------------------------------ vocabulary
    @property
    def vocab(self) -> dict[str, int]:
        words = [*SPECIAL_TOKENS]
        words += [f"{PROMPT_PREFIX}{q}" for q in range(self.n_prompts)]
        words += [f"{ANSWER_PREFIX}{j}" for j in range(self.n_answers)]
        return {w: i for i, w in enumerate(words)}

    @property
    def prompts(self) -> list[str]:
        return [f"{PROMPT_PREFIX}{q}" for q in range(self.n_prompts)]

    def answer_token_ids(self) -> np.ndarray:
        """Vocabulary id of answer j (``a{j}``)."""
        return len(SPECIAL_TOKENS) + self.n_prompts + np.arange(self.n_answers)

    def allowed_mask(self) -> np.ndarray:
        """``[P, vocab]`` 0/1 matrix: 1 on the allowed answer tokens of each prompt."""
        m = np.zeros((self.n_prompts, len(self.vocab)))
        ids = self.answer_token_ids()
        for q, a in enumerate(self.allowed):
            m[q, ids[list(a)]] = 1.0
        return m

    def table(self) -> dict[str, list]:
        """Prompt table (prompt, size, allowed answers, random-policy pass rate) for the dataset."""
        v = len(self.vocab)
        return {
            "prompt": self.prompts,
            "n_allowed": self.sizes.tolist(),
            "allowed": [" ".join(f"{ANSWER_PREFIX}{j}" for j in a) for a in self.allowed],
            "uniform_pass_rate": (self.sizes / v).tolist(),
        }

    # ------------------------------------------------------------------ reward
    def reward_function(self):
        """The 0/1 verifiable reward as a TRL reward function (``reward_funcs=[...]``)."""
        index = {p: q for q, p in enumerate(self.prompts)}
        allowed = [frozenset(f"{ANSWER_PREFIX}{j}" for j in a) for a in self.allowed]

        def correct(prompts, completions, **kwargs):
            out = []
            for p, c in zip(prompts, completions, strict=True):
                toks = c.split()
                out.append(1.0 if toks and toks[0] in allowed[index[p.strip()]] else 0.0)
            return out

        return correct

    # ------------------------------------------------------------------ torch parts
    def tokenizer(self):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.WordLevel(vocab=self.vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", bos_token="<bos>",
            padding_side="left",
        )  # fmt: skip

    def model(self, cfg: TRLRunConfig):
        """A randomly initialised Llama policy (weights fixed by ``task_seed``)."""
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        gen = torch.random.fork_rng()  # leave the global RNG stream as it was
        with gen:
            torch.manual_seed(cfg.task_seed)
            lc = LlamaConfig(
                vocab_size=len(self.vocab), hidden_size=cfg.hidden, intermediate_size=2 * cfg.hidden,
                num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads,
                max_position_embeddings=8, pad_token_id=0, eos_token_id=1, bos_token_id=3, tie_word_embeddings=True,
            )  # fmt: skip
            return LlamaForCausalLM(lc)

    def pass_rates(self, model, *, temperature: float, tokenizer, mask=None) -> np.ndarray:
        """Exact pass rate of every prompt under ``model``: softmax mass on its allowed set."""
        import torch

        enc = tokenizer(self.prompts, return_tensors="pt", padding=True)
        if mask is None:
            mask = torch.as_tensor(self.allowed_mask(), dtype=torch.float64)
        with torch.no_grad():
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[:, -1, :]
            prob = torch.softmax(logits.double() / temperature, dim=-1)
        return (prob * mask).sum(-1).numpy()
