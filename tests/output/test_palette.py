"""The roles a step gives a token (proposed, accepted, rejected, the target's) keep one hue each that no method
uses, so a colour in any lesson figure means one thing: a lane's colour is a method, a role's is a verdict."""

from __future__ import annotations

import colorsys

import pytest

from specviz.output.viz import theme


def hue(colour: str) -> tuple[float, float]:
    """(hue in degrees, saturation) of '#rrggbb'."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    h, _light, s = colorsys.rgb_to_hls(r, g, b)
    return 360 * h, s


def apart(a: float, b: float) -> float:
    return min(abs(a - b), 360 - abs(a - b))


def chromatic(colours: dict[str, str]) -> dict[str, float]:
    """name -> hue of the colours that have one (a grey's hue means nothing: plain decoding's lane, the baseline)."""
    return {n: h for n, c in colours.items() if (hs := hue(c))[1] >= 0.2 for h in [hs[0]]}


@pytest.mark.parametrize("role", sorted(theme.ROLES))
def test_a_role_hue_is_no_methods_hue(role):
    own, _s = hue(theme.ROLES[role])
    near = {n: round(apart(own, h)) for n, h in chromatic(theme.method_colors()).items()}
    assert min(near.values()) >= theme.MIN_HUE_APART, f"{role} ({theme.ROLES[role]}) too near: {near}"


def test_the_roles_are_apart_from_each_other():
    hues = chromatic(theme.ROLES)
    assert set(hues) == set(theme.ROLES) == {"proposed", "accepted", "rejected", "target"}  # none of them grey
    pairs = [(a, b) for a in hues for b in hues if a < b]
    assert all(apart(hues[a], hues[b]) >= 3 * theme.MIN_HUE_APART for a, b in pairs)


def test_the_check_fails_on_a_role_in_a_methods_hue():
    """The old accepted green (#16a34a) was EAGLE-3's hue within 2 degrees: the check must catch it."""
    own, _s = hue("#16a34a")
    near = min(apart(own, h) for h in chromatic(theme.method_colors()).values())
    assert near < theme.MIN_HUE_APART


def test_a_tint_keeps_its_roles_hue():
    assert theme.tint(theme.ACCEPT, 0.45) == "rgba(67,167,17,0.45)"
