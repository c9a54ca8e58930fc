"""Episode tokens: ShoppingBench's digit format, keyed, collision-free, only shown ones resolve."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from shopbench.env.tokens import TokenBook

KEY_A = b"a" * 32
KEY_B = b"b" * 32


def test_tokens_have_shoppingbench_digit_format() -> None:
    book = TokenBook(KEY_A)
    for i in range(200):
        p = book.show("product", f"{1000 + i}")
        s = book.show("shop", f"{i}")
        assert len(p) == 10 and p.isdigit() and p[0] != "0"
        assert len(s) == 9 and s.isdigit() and s[0] != "0"


@pytest.mark.parametrize("key", [KEY_A, bytes(range(16)), b"x" * 100])
def test_tokens_are_hmac_sha256_of_the_key(key: bytes) -> None:
    digest = hmac.new(key, b"p:4410867766", hashlib.sha256).digest()
    expected = 10**9 + int.from_bytes(digest[:8], "big") % (9 * 10**9)
    assert TokenBook(key).show("product", "4410867766") == str(expected)
    assert TokenBook(key)._derive("product", "4410867766", 0) == str(expected)
    assert TokenBook(key).show_all("product", ["1", "4410867766", "1"])[1:] == [
        str(expected),
        TokenBook(key).show("product", "1"),
    ]
    shop = hmac.new(key, b"s:123", hashlib.sha256).digest()
    assert TokenBook(key).show("shop", "123") == str(
        10**8 + int.from_bytes(shop[:8], "big") % (9 * 10**8)
    )


def test_same_key_same_tokens_other_key_other_tokens() -> None:
    ids = [str(4410867766 + i) for i in range(50)]
    a1 = [TokenBook(KEY_A).show("product", i) for i in ids]
    a2 = [TokenBook(KEY_A).show("product", i) for i in ids]
    b = [TokenBook(KEY_B).show("product", i) for i in ids]
    assert a1 == a2
    assert all(x != y for x, y in zip(a1, b, strict=True))
    assert a1 != ids  # never the catalog id itself


def test_only_shown_tokens_resolve_and_kinds_stay_apart() -> None:
    book = TokenBook(KEY_A)
    token = book.show("product", "591486855")
    shop = book.show("shop", "12345678")
    assert book.resolve(token) == "591486855"
    assert book.resolve(token, "product") == "591486855"
    assert book.resolve(token, "shop") is None
    assert book.resolve(shop, "shop") == "12345678"
    # the token another product would get is not valid until it is shown
    unseen = TokenBook(KEY_A).show("product", "4410867766")
    assert book.resolve(unseen) is None
    assert book.mapping() == {token: "591486855", shop: "12345678"}
    assert book.mapping("shop") == {shop: "12345678"}
    assert book.show("product", "591486855") == token  # idempotent
    assert len(book) == 2


def test_colliding_ids_get_distinct_tokens() -> None:
    # Find two shop ids whose first-attempt tokens collide under KEY_A (9 digits: the
    # birthday bound is ~40k ids), then show both in one book.
    probe = TokenBook(KEY_A)
    seen: dict[str, str] = {}
    pair = None
    for i in range(300_000):
        cid = str(i)
        t = probe._derive("shop", cid, 0)
        if t in seen:
            pair = (seen[t], cid)
            break
        seen[t] = cid
    assert pair is not None
    book = TokenBook(KEY_A)
    t1, t2 = book.show("shop", pair[0]), book.show("shop", pair[1])
    assert t1 != t2
    assert book.resolve(t1) == pair[0] and book.resolve(t2) == pair[1]


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        TokenBook(b"short")


def test_episode_keys_come_from_the_seed_and_never_repeat_within_a_block() -> None:
    from shopbench.env.episode import episode_id
    from shopbench.env.keys import EpisodeKeys, episode_key, find_key

    keys = EpisodeKeys(seed=11, generation=2)
    first, again = keys.next(5, 3, "task-a"), keys.next(5, 3, "task-a")
    assert first == episode_key(11, 2, 5, 3, "task-a", 0)
    assert again == episode_key(11, 2, 5, 3, "task-a", 1) != first  # same coordinates: attempt 1
    assert keys.next(6, 3, "task-a") == episode_key(11, 2, 6, 3, "task-a", 0)  # a new block
    assert len({episode_key(s, g, 5, 3, "task-a") for s, g in ((11, 2), (12, 2), (11, 3))}) == 3
    assert find_key(11, 2, 5, 3, "task-a", episode_id(again)) == again
    assert find_key(12, 2, 5, 3, "task-a", episode_id(again)) is None  # another seed
    assert find_key(11, 2, 5, 4, "task-a", episode_id(again)) is None  # another miner
