"""A real TRL GRPOTrainer run on CPU with nothing downloaded (shared by tests and bench/live_overhead.py).

A randomly initialised one-layer Llama built from a ``LlamaConfig``, a word-level tokenizer built
with the ``tokenizers`` library, an in-memory ``datasets.Dataset`` of prompts and a verifiable reward
"share of completion tokens that are X". 30 steps take a few seconds on one CPU core.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h", "x"]


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, "<bos>": 3}
    vocab.update({w: i + 4 for i, w in enumerate(WORDS)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", bos_token="<bos>",
        padding_side="left",
    )  # fmt: skip


def reward_has_x(completions, **kwargs):
    """Verifiable reward: share of the completion's tokens that are 'x'."""
    out = []
    for c in completions:
        toks = c.split()
        out.append(sum(t == "x" for t in toks) / max(1, len(toks)))
    return out


def make_trainer(output_dir, *, max_steps: int = 30, callbacks=(), report_to="none", logging_steps: int = 1,
                 learning_rate: float = 3e-2, seed: int = 0, save_strategy: str = "no", save_steps: int = 10,
                 beta: float = 0.0, **config):  # fmt: skip
    """A GRPOTrainer on CPU: 4 completions of 8 tokens per prompt, one prompt per step (``beta > 0``: a
    reference model and the ``kl`` TRL then logs)."""
    import torch
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    tok = tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg)
    if beta:  # TRL loads the reference model from the policy's name: save the random initial weights for it
        init = Path(output_dir) / "initial_model"
        model.save_pretrained(init)
        model.config._name_or_path = str(init)
    prompts = [" ".join(WORDS[(i + k) % 8] for k in range(3)) for i in range(64)]
    ds = Dataset.from_dict({"prompt": prompts})
    args = GRPOConfig(
        output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, logging_steps=logging_steps, learning_rate=learning_rate, report_to=report_to,
        use_cpu=True, save_strategy=save_strategy, save_steps=save_steps, disable_tqdm=True, seed=seed,
        temperature=1.0, beta=beta, dataloader_num_workers=0, **config,
    )  # fmt: skip
    return GRPOTrainer(model=model, reward_funcs=reward_has_x, args=args, train_dataset=ds, processing_class=tok,
                       callbacks=list(callbacks))  # fmt: skip
