"""A saved drafter records the target it was trained for; loading it for another model of the same sizes is a
clear error (it would run, lossless but slow, with nothing saying why), and an older drafter without the
record loads with a warning."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from divelab.lm.models import build_model
from divelab.serving.dspark import Drafter, DrafterConfig, load_drafter, save_drafter
from divelab.serving.dspark.identity import TARGET_FILE


def _target(name: str = "", **overrides):
    model = build_model("tiny-100k", 41, seed=1, **overrides)
    model.config._name_or_path = name
    return model


def _saved(target, path):
    torch.manual_seed(0)
    return save_drafter(Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=8, rank=8)), path)


def test_the_target_is_recorded_and_a_same_sized_other_model_is_refused(tmp_path):
    a = _target("org/model-a")
    path = _saved(a, tmp_path / "d")
    record = json.loads((path / TARGET_FILE).read_text())
    assert record["name_or_path"] == "org/model-a" and record["vocab_size"] == 41
    assert record["embedding_shape"] == list(a.get_input_embeddings().weight.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_drafter(path, a)  # its own target: no warning
    other = _target("org/model-b", intermediate_size=a.config.intermediate_size * 2)
    assert (other.config.vocab_size, other.config.hidden_size) == (a.config.vocab_size, a.config.hidden_size)
    with pytest.raises(ValueError, match=r"trained for org/model-a, not for org/model-b: config intermediate_size"):
        load_drafter(path, other)


def test_a_renamed_checkpoint_of_the_same_architecture_loads_with_a_warning(tmp_path):
    path = _saved(_target("/ckpt/model-v1"), tmp_path / "d")
    with pytest.warns(UserWarning, match="trained for /ckpt/model-v1; loading it for /ckpt/model-v2"):
        load_drafter(path, _target("/ckpt/model-v2"))
    with warnings.catch_warnings():  # the same checkpoint in another folder (another cache) is the same model
        warnings.simplefilter("error")
        load_drafter(path, _target("/elsewhere/model-v1"))


def test_an_old_drafter_without_the_record_loads_with_a_warning(tmp_path):
    a = _target()
    path = _saved(a, tmp_path / "d")
    (path / TARGET_FILE).unlink()
    with pytest.warns(UserWarning, match="no record of the model it was trained for"):
        drafter, _ = load_drafter(path, a)
    assert drafter.config.vocab_size == 41
