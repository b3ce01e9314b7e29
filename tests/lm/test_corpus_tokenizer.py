"""The stdlib corpus (splits, manifest, exclusions) and the BPE tokenizer."""

from __future__ import annotations

import pytest

from divelab.lm import corpus as corpus_mod
from divelab.lm.corpus import CorpusConfig, load_corpus, load_paths, manifest, split_of
from divelab.lm.tokenizer import encode_split, get_tokenizer, tokenizer_path, train_tokenizer

SMALL = CorpusConfig(max_bytes=300_000)


@pytest.fixture
def fake_stdlib(tmp_path):
    root = tmp_path / "lib"
    for i in range(60):
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        (root / "pkg" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    for sub in ("test", "site-packages/foo", "encodings"):
        (root / sub).mkdir(parents=True)
        (root / sub / "skipme.py").write_text("SKIP = 1\n")
    (root / "big.py").write_text("x = 1\n" * 100)
    (root / "latin1.py").write_bytes(b"s = '\xe9'\n")
    (root / "_sysconfigdata__x.py").write_text("build = {}\n")
    return root


def test_split_is_a_pure_function_of_the_path():
    assert split_of("json/decoder.py") == split_of("json/decoder.py")
    splits = [split_of(f"m{i}.py") for i in range(2000)]
    assert 0.85 < splits.count("train") / 2000 < 0.95
    assert splits.count("val") > 0 and splits.count("test") > 0


def test_real_stdlib_splits_are_disjoint_and_manifest_is_stable():
    paths = {s: set(load_paths(s, SMALL)) for s in ("train", "val", "test")}
    assert paths["train"] and paths["val"] and paths["test"]
    assert not (paths["train"] & paths["val"] or paths["train"] & paths["test"] or paths["val"] & paths["test"])
    assert not any("/test/" in p or p.startswith("test/") or "site-packages" in p for s in paths.values() for p in s)
    m1 = manifest(SMALL)
    corpus_mod._build.cache_clear()
    m2 = manifest(SMALL)
    assert m1.key == m2.key and m1.splits == m2.splits
    assert m1.splits["train"].bytes <= 0.9 * 300_000 + 1
    assert m1.splits["train"].files == len(load_corpus("train", SMALL))
    # a smaller cap is a prefix of a larger one (hash order), and changes the manifest key
    smaller = CorpusConfig(max_bytes=100_000)
    assert load_paths("train", smaller) == load_paths("train", SMALL)[: len(load_paths("train", smaller))]
    assert manifest(smaller).key != m1.key


def test_exclusions_and_caps_on_a_fake_stdlib(fake_stdlib):
    cfg = CorpusConfig(root=str(fake_stdlib), max_file_bytes=200)
    every = [p for s in ("train", "val", "test") for p in load_paths(s, cfg)]
    assert every and all(p.startswith("pkg/") for p in every)  # test/, site-packages, encodings, big, latin-1
    m = manifest(cfg)
    assert m.skipped["too_large"] == 1 and m.skipped["not_utf8"] == 1
    assert sum(sp.files for sp in m.splits.values()) == 60
    with_tests = CorpusConfig(root=str(fake_stdlib), max_file_bytes=200, include_tests=True)
    assert any(p.startswith("test/") for s in ("train", "val", "test") for p in load_paths(s, with_tests))
    capped = CorpusConfig(root=str(fake_stdlib), max_files=20)
    assert len(load_paths("train", capped)) == 18


def test_bad_inputs_give_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown split 'dev'.*train, val, test"):
        load_corpus("dev", SMALL)
    with pytest.raises(FileNotFoundError, match="no Python standard-library sources"):
        manifest(CorpusConfig(root=str(tmp_path)))
    with pytest.raises(ValueError, match="fractions"):
        CorpusConfig(fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="vocab_size"):
        get_tokenizer(100, SMALL)


def test_tokenizer_round_trips_python_source_and_is_cached():
    tok = get_tokenizer(512, SMALL)
    assert len(tok) == 512 and tok.eos_token == "<|endoftext|>" and tok.pad_token_id != tok.eos_token_id
    src = 'def f(x):\n\tif x:  # ünïcode → ok\n        return "a\\n"  \r\n\n\n'
    ids = tok.encode(src)
    assert tok.decode(ids) == src
    assert len(ids) < len(src.encode())  # merges were learnt
    assert tokenizer_path(512, SMALL).joinpath("tokenizer.json").exists()
    again = get_tokenizer(512, SMALL)
    assert again.get_vocab() == tok.get_vocab()
    # training is deterministic
    texts = load_corpus("train", CorpusConfig(max_bytes=60_000))
    assert train_tokenizer(texts, 300).get_vocab() == train_tokenizer(texts, 300).get_vocab()
    stream = encode_split(tok, "val", SMALL)
    assert stream.ndim == 1 and (stream == tok.eos_token_id).sum() == manifest(SMALL).splits["val"].files
