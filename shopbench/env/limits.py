"""The limits of one episode: steps, calls, ids and sizes (DESIGN.md, "Limits of an episode")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EpisodeLimits(BaseModel):
    """Every bound an episode enforces; the defaults are the subnet's consensus values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(default=30, ge=1, description="assistant turns per episode")
    max_calls_per_turn: int = Field(default=5, ge=1, description="tool calls per turn")
    max_view_ids: int = Field(
        default=10, ge=1, description="product ids per view_product_information call"
    )
    max_recommend_ids: int = Field(
        default=10, ge=1, description="product ids in the one recommend_product call"
    )
    max_web_results: int = Field(default=10, ge=1, description="upper bound of max_results")
    max_string_chars: int = Field(
        default=500, ge=1, description="characters in any one string argument (q, ids, ...)"
    )
    max_arguments_bytes: int = Field(
        default=4096, ge=64, description="bytes of one call's arguments as JSON"
    )
    max_tool_name_chars: int = Field(default=64, ge=1, description="characters in a tool name")
    max_description_chars: int = Field(
        default=4000, ge=100, description="a viewed product's description is cut to this length"
    )
    max_snippet_chars: int = Field(
        default=600, ge=50, description="characters of page text per web_search result"
    )
    max_content_bytes: int = Field(
        default=16_384, ge=1, description="bytes of an assistant message's content"
    )
    max_reasoning_bytes: int = Field(
        default=16_384, ge=1, description="bytes of an assistant message's reasoning"
    )

    def message_violation(self, reasoning: str | None, content: str | None) -> str | None:
        """Why an assistant message is over its size limits, or None when it fits."""
        for name, text, cap in (
            ("reasoning_content", reasoning, self.max_reasoning_bytes),
            ("content", content, self.max_content_bytes),
        ):
            if text is not None and len(text.encode("utf-8")) > cap:
                return f"{name} is {len(text.encode('utf-8'))} bytes; the limit is {cap}"
        return None
