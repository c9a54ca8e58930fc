"""The product record: ShoppingBench's fields, plus the two we add for grouping."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Service = Literal["official", "freeShipping", "COD", "flashsale"]
SERVICES: tuple[Service, ...] = ("official", "freeShipping", "COD", "flashsale")

SORTS: tuple[str, ...] = ("default", "priceasc", "pricedesc", "order")


class Product(BaseModel):
    """One marketplace listing, with ShoppingBench's field names and types.

    `sku_options` maps an option index ("0", "1", ...) to one purchasable combination, e.g.
    ``{"0": {"size": "M", "color_family": "black"}}``; `attributes` maps a key to its values.
    `base_id` names the base product this listing sells (several shops list the same base
    product); it is ours, not ShoppingBench's, and may be absent on imported catalogs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    product_id: str = Field(pattern=r"^[0-9]{1,20}$")
    shop_id: str = Field(pattern=r"^[0-9]{1,20}$")
    brand: str = Field(default="", max_length=200)
    category: str = Field(max_length=500, description='"Top > Mid > Leaf"')
    title: str = Field(min_length=1, max_length=1000)
    short_description: str = Field(default="", max_length=5000)
    description: str = Field(default="", max_length=100_000)
    specification: str = Field(default="", max_length=20_000)
    price: float = Field(ge=0)
    sold_count: int = Field(default=0, ge=0)
    sku_options: dict[str, dict[str, str]] = Field(default_factory=dict)
    attributes: dict[str, list[str]] = Field(default_factory=dict)
    service: list[Service] = Field(default_factory=list)
    base_id: str | None = None

    @property
    def leaf(self) -> str:
        """The last level of the category path."""
        return self.category.rsplit(">", 1)[-1].strip()

    @property
    def group_key(self) -> str:
        """The product group (leaf category × brand) that decides the held-out split."""
        return f"{self.category.strip().lower()}|{self.brand.strip().lower()}"
