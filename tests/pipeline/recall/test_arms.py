"""The retrieval arms' registry: every arm can run, unknown ones are errors, weights per arm."""

import pytest

from memlane.pipeline.config import RecallConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall import arms
from memlane.pipeline.store.search import SQL_ARMS


def test_every_registered_arm_can_run():
    for arm in arms.REGISTRY.values():
        runs = arm.run is not None or arm.expand is not None
        assert runs or arm.name in SQL_ARMS, f"arm {arm.name} has neither SQL nor a runner"
        assert arm.needs <= arms.NEEDS


def test_an_unknown_arm_is_an_error_not_an_empty_result():
    with pytest.raises(InvalidInput, match="unknown retrieval arm.*known: vector, keyword"):
        arms.resolve(("vector", "no-such-arm"))
    with pytest.raises(InvalidInput, match="at least one"):
        arms.resolve(())
    assert [a.name for a in arms.resolve(("keyword", "vector"))] == ["vector", "keyword"]


def test_arm_weights_default_to_every_arm_and_refuse_unknown_arms():
    defaults = arms.default_weights()
    assert RecallConfig().arm_weights == defaults
    assert {"vector": 1.0, "keyword": 1.0}.items() <= defaults.items()
    assert RecallConfig(arm_weights={"keyword": 0.5}).arm_weights == {**defaults, "keyword": 0.5}
    with pytest.raises(ValueError, match="unknown arm"):
        RecallConfig(arm_weights={"no-such-arm": 1.0})
    with pytest.raises(ValueError, match="from 0 to 100"):
        RecallConfig(arm_weights={"vector": -1.0})


def test_the_per_arm_weight_keys_of_before_the_arm_registry_are_refused_by_name():
    with pytest.raises(ValueError, match="vector_weight"):
        RecallConfig.model_validate({"vector_weight": 2.0})
