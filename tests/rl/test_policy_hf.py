"""LMPolicy on Hugging Face causal LMs with their own tokenizers, peft LoRA included, and the word-level
path unchanged (divelab.rl.policy, divelab.rl.tokens)."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
import torch

from divelab.envs.base import InvalidAction, ReplayRestore
from divelab.lm.adapt import LoraSpec
from divelab.lm.models import build_model
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.rl.tokens import as_tokens
from hf_tiny import MODELS, bpe_tokenizer, tiny_model_and_tokenizer, tiny_qwen2

OBS = ["You are in the Kitchen. There is a brass key on the table.", "You take the brass key."]
CANDS = [["go north", "open the chest with the brass key", "look"], ["inventory", "drop brass key"]]
CFG = PolicyConfig(history=1, head_tokens=6, tail_tokens=20)


def one_row_logprobs(model, tok, context: str, cands: list[str], sep: int, eos: int) -> torch.Tensor:
    """log pi over ``cands``: each candidate scored alone (no padding, full logits), ids from ``tok`` itself."""
    ids = tok.encode(context, add_special_tokens=False)
    ids = ids if len(ids) <= CFG.head_tokens + CFG.tail_tokens else ids[:CFG.head_tokens] + ids[-CFG.tail_tokens:]
    scores = []
    for c in cands:
        tail = tok.encode(c, add_special_tokens=False) + [eos]
        row = torch.tensor([ids + [sep] + tail])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=row).logits[0, :-1].float(), -1)
        targets = row[0, 1:]
        scores.append(lp[torch.arange(len(targets)), targets][-len(tail):].sum())
    return torch.log_softmax(torch.stack(scores), 0)


def contexts(policy: LMPolicy) -> list[str]:
    return [policy.context(OBS[:1], []), policy.context(OBS, ["take brass key"])]


@pytest.mark.parametrize("arch", list(MODELS))
def test_hf_policy_scores_each_candidate_as_a_one_row_forward_would(arch: str) -> None:
    model, tok = tiny_model_and_tokenizer(arch)
    policy = LMPolicy(model, tok, CFG)
    newline = tok.encode("\n", add_special_tokens=False)
    # the tokenizer's own specials: eos, pad (or eos), and no sep token, so the one id of "\n"
    assert tok.sep_token_id is None and len(newline) == 1
    assert (policy.eos_id, policy.sep_id) == (tok.eos_token_id, newline[0])
    assert policy.pad_id == tok.pad_token_id
    ctxs = contexts(policy)
    got = policy.candidate_logprobs(ctxs, CANDS)
    for ctx, cands, lp in zip(ctxs, CANDS, got, strict=True):
        torch.testing.assert_close(lp, one_row_logprobs(model, tok, ctx, cands, policy.sep_id, policy.eos_id),
                                   atol=2e-5, rtol=0)
    probs = policy.batch_action_probs(ctxs, CANDS)
    assert [round(float(p.sum()), 6) for p in probs] == [1.0, 1.0]
    assert (policy.action_probs(ctxs[1], CANDS[1]) == probs[1]).all()


def test_a_tokenizer_without_pad_pads_with_eos() -> None:
    from transformers import PreTrainedTokenizerFast

    base = bpe_tokenizer()
    tok = PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer, eos_token=base.eos_token)
    assert tok.pad_token_id is None
    model = tiny_qwen2(tok)
    policy = LMPolicy(model, tok, CFG)
    assert policy.pad_id == policy.eos_id == tok.eos_token_id
    ctxs = contexts(policy)
    for ctx, cands, lp in zip(ctxs, CANDS, policy.candidate_logprobs(ctxs, CANDS), strict=True):
        torch.testing.assert_close(lp, one_row_logprobs(model, tok, ctx, cands, policy.sep_id, policy.eos_id),
                                   atol=2e-5, rtol=0)


def test_a_tokenizer_without_eos_is_refused_with_what_to_pass() -> None:
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=bpe_tokenizer().backend_tokenizer)
    with pytest.raises(ValueError, match=r"tokenizer \w+ has no eos_token.*tokenizer.eos_token"):
        LMPolicy(tiny_qwen2(bpe_tokenizer()), tok)
    with pytest.raises(TypeError, match="tokenizers.Tokenizer or a Hugging Face tokenizer"):
        LMPolicy(tiny_qwen2(bpe_tokenizer()), {"[PAD]": 0})
    from tokenizers import Tokenizer, models

    bare = Tokenizer(models.WordLevel({"go": 0, "[UNK]": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match=r"lacks special tokens \['\[PAD\]', '\[SEP\]', '\[EOS\]'\]"):
        LMPolicy(build_model("tiny-100k", 2, seed=0, hidden_size=16, num_hidden_layers=1), bare)


# -- the word-level path: the same numbers as before -------------------------------------------------------


def old_candidate_logprobs(model, tok, ctxs: list[str], cands: list[list[str]], cfg: PolicyConfig):
    """LMPolicy.candidate_logprobs as it was written for word-level tokenizers only (ids by token_to_id,
    one right-padded batch, the LM head applied to the scored positions of ``model.base_model``)."""
    pad, sep, eos = (tok.token_to_id(t) for t in ("[PAD]", "[SEP]", "[EOS]"))
    rows = []
    for ctx, cs in zip(ctxs, cands, strict=True):
        ids = tok.encode(ctx).ids
        h, t = cfg.head_tokens, cfg.tail_tokens
        ids = (ids if len(ids) <= h + t else ids[:h] + ids[-t:]) + [sep]
        for c in cs:
            tail = tok.encode(c).ids + [eos]
            rows.append((ids + tail, len(tail)))
    width = max(len(r) for r, _ in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    score_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for r, (ids, n) in enumerate(rows):
        input_ids[r, :len(ids)] = torch.tensor(ids)
        attn[r, :len(ids)] = 1
        score_mask[r, len(ids) - n:len(ids)] = True
    targets, pred_mask = input_ids[:, 1:], score_mask[:, 1:]
    with torch.no_grad():
        hidden = model.base_model(input_ids=input_ids, attention_mask=attn).last_hidden_state[:, :-1]
        rows_i, cols_i = pred_mask.nonzero(as_tuple=True)
        logits = model.get_output_embeddings()(hidden[rows_i, cols_i]).float()
    tok_lp = torch.log_softmax(logits, dim=-1).gather(-1, targets[rows_i, cols_i].unsqueeze(-1)).squeeze(-1)
    scores = torch.zeros(len(rows), dtype=tok_lp.dtype).index_add(0, rows_i, tok_lp)
    out, start = [], 0
    for cs in cands:
        out.append(torch.log_softmax(scores[start:start + len(cs)], dim=0))
        start += len(cs)
    return out


def test_word_level_policy_gives_bit_identical_numbers_to_the_old_path() -> None:
    tok = train_word_tokenizer(OBS + [c for cs in CANDS for c in cs] + ["take brass key"])
    model = build_model("tiny-100k", tok.get_vocab_size(), seed=3, hidden_size=32, num_hidden_layers=1).eval()
    policy = LMPolicy(model, tok, CFG)
    assert (policy.pad_id, policy.sep_id, policy.eos_id) == tuple(tok.token_to_id(t) for t in ("[PAD]", "[SEP]", "[EOS]"))
    assert isinstance(policy.tokenizer, type(tok)) and as_tokens(tok).encode(OBS[0]) == tok.encode(OBS[0]).ids
    ctxs = contexts(policy)
    with torch.no_grad():
        new = policy.candidate_logprobs(ctxs, CANDS)
    for a, b in zip(new, old_candidate_logprobs(model, tok, ctxs, CANDS, CFG), strict=True):
        assert torch.equal(a, b)


# -- peft LoRA -----------------------------------------------------------------------------------------------

class OneChoiceEnv(ReplayRestore):
    """One decision between two words of the same token length ("look" wins): a random policy wins about
    half its episodes, so every group has wins and losses."""

    def __init__(self) -> None:
        self._seed, self._done = None, False

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._done = seed, False
        return "you stand in a hall ."

    def admissible_actions(self) -> list[str]:
        return [] if self._done else ["look", "wait"]

    def step(self, action: str):
        if action not in self.admissible_actions():
            raise InvalidAction(action)
        self._done, won = True, action == "look"
        return "you win ." if won else "nothing happens .", float(won), True, {"won": won, "truncated": False}

    def state_key(self, observation: str) -> Hashable:
        return observation

    def clone(self) -> OneChoiceEnv:
        return OneChoiceEnv()


LORA_TARGETS = {"qwen2": ("q_proj", "v_proj"), "gpt2": ("c_attn",)}


def lora_policy(arch: str) -> tuple[LMPolicy, LMPolicy]:
    from peft import get_peft_model

    model, tok = tiny_model_and_tokenizer(arch)
    base = LMPolicy(model, tok, CFG)
    plain_scores = base.candidate_logprobs(contexts(base), CANDS)
    wrapped = get_peft_model(model, LoraSpec(r=4, alpha=8, target_modules=LORA_TARGETS[arch]).peft_config())
    return LMPolicy(wrapped, tok, CFG), plain_scores


@pytest.mark.parametrize("arch", list(MODELS))
def test_lora_wrapped_policy_scores_like_its_base_at_init(arch: str) -> None:
    policy, plain_scores = lora_policy(arch)
    for a, b in zip(policy.candidate_logprobs(contexts(policy), CANDS), plain_scores, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)  # LoRA's B starts at zero


@pytest.mark.parametrize("arch", list(MODELS))
def test_a_grpo_step_on_a_lora_policy_changes_only_the_adapters(arch: str) -> None:
    policy, _ = lora_policy(arch)
    before = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)  # peft froze the base

    trainer = GRPOTrainer(policy, lambda game_id: OneChoiceEnv(), ["pick"],
                          GRPOConfig(iterations=2, group_size=8, max_steps=1, lr=1e-2, seed=0))
    logs = list(trainer.train())
    assert any(0 < log.success < 1 for log in logs)  # a group with wins and losses: a non-zero gradient
    after = policy.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed), sorted(changed)[:5]
    assert any("lora_B" in k for k in changed)


def test_lora_on_a_word_level_llama_scores_through_the_adapted_body() -> None:
    """peft's ``base_model`` is its tuner (whose call returns logits); the policy must reach the wrapped
    model's transformer body, where the LoRA layers sit."""
    from peft import get_peft_model

    tok = train_word_tokenizer(OBS + [c for cs in CANDS for c in cs] + ["take brass key"])
    model = build_model("tiny-100k", tok.get_vocab_size(), seed=3, hidden_size=32, num_hidden_layers=1).eval()
    plain = LMPolicy(model, tok, CFG)
    want = plain.candidate_logprobs(contexts(plain), CANDS)
    wrapped = LMPolicy(get_peft_model(model, LoraSpec(r=4, alpha=8).peft_config()), tok, CFG)
    got = wrapped.candidate_logprobs(contexts(wrapped), CANDS)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    sum(lp[0] for lp in got).backward()
    grads = {n for n, p in wrapped.model.named_parameters() if p.grad is not None}
    assert grads and all("lora_" in n for n in grads)
