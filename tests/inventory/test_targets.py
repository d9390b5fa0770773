"""Target expressions select exactly the hosts an operator means, and refuse typos."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.errors import ValidationError
from scheduler.submission.targets import parse_target, resolve_target

HOSTS = [f"web-{i:02d}" for i in range(1, 11)] + ["db-01", "db-02", "lb-01"]
GROUPS = {
    "web": {h for h in HOSTS if h.startswith("web")},
    "db": {"db-01", "db-02"},
    "customer-acme": {"web-01", "db-01"},
    "empty": set(),
}


def test_a_union_of_groups_minus_one_host_selects_the_rest() -> None:
    selected = resolve_target("group:web,group:db,!web-07", HOSTS, GROUPS)
    assert "web-07" not in selected
    assert set(selected) == (GROUPS["web"] | GROUPS["db"]) - {"web-07"}
    assert selected == sorted(selected)


def test_globs_match_host_names_and_group_names() -> None:
    assert resolve_target("web-0[1-3]", HOSTS, GROUPS) == ["web-01", "web-02", "web-03"]
    assert resolve_target("group:customer-*", HOSTS, GROUPS) == ["db-01", "web-01"]


def test_all_selects_every_host_and_exclusions_apply() -> None:
    assert resolve_target("all,!group:web", HOSTS, GROUPS) == ["db-01", "db-02", "lb-01"]


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("", "empty"),
        ("group:web,,db-01", "empty term"),
        ("!web-01", "only excludes"),
        ("web-99", "no host named"),
        ("group:wbe", "no group named"),
        ("cache-*", "selects no hosts"),
        ("group:empty", "selects no hosts"),
        ("group:web,!group:web", "everything was excluded"),
        ("web-01;rm -rf /", "not a host name"),
        ("-oProxyCommand=x", "not a host name"),
        ("group:", "not a host name"),
    ],
)
def test_a_bad_or_empty_target_is_refused_with_one_line(expr: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        resolve_target(expr, HOSTS, GROUPS)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_a_parsed_target_prints_back_as_the_expression() -> None:
    assert str(parse_target(" group:web , !web-07 ")) == "group:web,!web-07"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_either_resolves_or_raises_a_validation_error(expr: str) -> None:
    try:
        selected = resolve_target(expr, HOSTS, GROUPS, {"web-01": {"tier": "canary"}})
    except ValidationError:
        return
    assert selected and set(selected) <= set(HOSTS)
