"""Views say what the user chose (a `messages.Navigation` nested in the view's class) and the
navigator decides where it leads: every such message has its own `case` in `Navigator.follow`
(one without would reach `case _` and fail when the user chose it)."""
from __future__ import annotations

import ast
import inspect
import textwrap


def _kinds(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _kinds(sub)
    return out


def test_every_navigation_has_a_route():
    import nsight_tui.tui.app  # noqa: F401  (every view the app opens, and the palette)
    from nsight_tui.tui.messages import Navigation
    from nsight_tui.tui.navigator import Navigator

    tree = ast.parse(textwrap.dedent(inspect.getsource(Navigator.follow)))
    routed = {ast.unparse(node.cls) for node in ast.walk(tree) if isinstance(node, ast.MatchClass)}
    said = {kind.__qualname__ for kind in _kinds(Navigation)}
    assert len(said) >= 10  # the views' choices were found at all
    assert said == routed, f"without a route: {sorted(said - routed)}; routes to nothing: {sorted(routed - said)}"
