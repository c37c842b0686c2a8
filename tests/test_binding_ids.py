"""The id rule every framework face shares (``integrations/binding.py``): any key
makes a valid session id, and no two keys, of one face or of two, make the same."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.integrations.binding import namespaced
from threadline.store.checks import validate_session_id

PREFIXES = ["lg", "lc", "pa", "oa"]
KEYS = st.one_of(
    st.text(min_size=1, max_size=200),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,130}", fullmatch=True),
    st.builds(lambda k: "lg_" + k, st.from_regex(r"[0-9a-f]{40}", fullmatch=True)),
)


@given(st.sampled_from(PREFIXES), KEYS)
def test_every_key_makes_a_valid_id(prefix: str, key: str) -> None:
    assert validate_session_id(namespaced(prefix, key)) == namespaced(prefix, key)


@given(st.sampled_from(PREFIXES), st.sampled_from(PREFIXES), KEYS, KEYS)
def test_no_two_keys_share_an_id(first: str, second: str, a: str, b: str) -> None:
    if (first, a) != (second, b):
        assert namespaced(first, a) != namespaced(second, b)


@given(KEYS)
def test_a_hashed_id_typed_as_a_key_is_another_id(key: str) -> None:
    made = namespaced("lg", key)
    assert namespaced("lg", made) != made
