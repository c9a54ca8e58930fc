"""What the subnet benchmarks measure: their configs, apart from the benchmarks themselves,
so that ``shopbench bench --help`` reads their flags without loading the subnet layer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class TransportBenchConfig(BaseModel):
    """What ``shopbench bench transport`` measures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_c1: int = Field(default=300, ge=1, description="round trips timed one at a time")
    requests_c64: int = Field(
        default=2000, ge=64, description="round trips timed with 64 in flight"
    )
    seed: int = Field(default=0, description="seed of the synthetic 15-turn history")


class ValidatorBenchConfig(BaseModel):
    """What ``shopbench bench validator`` measures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    miners: int = Field(default=32, ge=1, description="instant miners")
    concurrency: int = Field(default=64, ge=1, description="episodes at once")
    episodes: int = Field(default=64, ge=1, description="episodes timed at full concurrency")
    processes: int = Field(
        default=4, ge=1, description="miner processes (the miners are spread over them)"
    )
    products: int = Field(default=5_000, ge=500, description="catalog size")
    seed: int = Field(default=1, description="seed of the catalog and the tasks")
    intents: list[str] | None = Field(
        default=None, description="intents of the tasks played, played in turn (repeat; "
        "default: every registered intent)",
        json_schema_extra={"flag": "intent"},
    )  # fmt: skip

    @field_validator("intents")
    @classmethod
    def _registered(cls, intents: list[str] | None) -> list[str] | None:
        from shopbench.tasks.intent_registry import intent_names

        known = intent_names()
        for intent in intents or []:
            if intent not in known:
                raise ValueError(f"unknown intent {intent!r}; allowed: {', '.join(known)}")
        return intents
