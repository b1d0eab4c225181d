"""Every agent in ``ajax.AGENTS`` is on every list of agents: the README, the getting-started
page, the agents' overview, the API reference, the site's navigation (with a page of its
own) and ``ajax list``. The next agent cannot be left out of one of them, nor of the
training page's list of agents that standardise observations if it can."""

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

import ajax
from ajax import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages(nav: object) -> set[str]:
    """Every page path in mkdocs.yml's ``nav`` (nested lists of ``title: page`` entries)."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(v) for v in nav.values()))
    if isinstance(nav, list):
        return set().union(*(_nav_pages(v) for v in nav))
    return set()


def _word(name: str, text: str) -> bool:
    """Whether ``name`` stands in ``text`` as a word of its own (SAC is not in ASAC)."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", text) is not None


def ajax_list() -> str:
    """What ``ajax list`` prints, run in this process."""
    with cli.console.capture() as captured:
        assert cli.main(["list"]) == 0
    return captured.get()


def missing_from_lists(names: Iterable[str], listing: str) -> list[str]:
    """One line for each place an agent of ``names`` is missing from; ``listing`` is the
    output of ``ajax list``."""
    readme = (ROOT / "README.md").read_text()
    index = (DOCS / "index.md").read_text()
    overview = (DOCS / "agents" / "index.md").read_text()
    api = (DOCS / "api.md").read_text()
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    listed = set(re.findall(r"[A-Za-z0-9]+", listing))
    problems = []
    for name in names:
        page = f"agents/{name.lower()}.md"
        checks = {
            "named in README.md": _word(name, readme),
            f"linked from docs/index.md ({page})": f"({page})" in index,
            f"linked from docs/agents/index.md ({name.lower()}.md)": f"({name.lower()}.md)"
            in overview,
            f"documented in docs/api.md (::: ajax.{name})": re.search(
                rf"^::: ajax\.{re.escape(name)}$", api, re.M
            )
            is not None,
            f"in mkdocs.yml's nav ({page})": page in nav,
            f"a page of its own (docs/{page})": (DOCS / page).is_file(),
            "listed by `ajax list`": name in listed,
        }
        problems += [f"{name}: not {what}" for what, ok in checks.items() if not ok]
    return problems


def test_every_agent_is_on_every_list():
    assert missing_from_lists(ajax.AGENTS, ajax_list()) == []


class _Unlisted:
    """An agent class no page knows: what ``ajax list`` reads of one."""

    action_spaces = (ajax.envs.Discrete,)
    default_n_envs = 1


def test_the_check_finds_an_agent_the_pages_leave_out(monkeypatch):
    """An agent registered but written nowhere is reported everywhere but by ``ajax list``,
    which reads ``AGENTS`` itself."""
    monkeypatch.setitem(ajax.AGENTS, "NOVEL", _Unlisted)
    assert missing_from_lists(ajax.AGENTS, ajax_list()) == [
        "NOVEL: not named in README.md",
        "NOVEL: not linked from docs/index.md (agents/novel.md)",
        "NOVEL: not linked from docs/agents/index.md (novel.md)",
        "NOVEL: not documented in docs/api.md (::: ajax.NOVEL)",
        "NOVEL: not in mkdocs.yml's nav (agents/novel.md)",
        "NOVEL: not a page of its own (docs/agents/novel.md)",
    ]


def test_the_check_finds_an_agent_ajax_list_leaves_out():
    listing = "\n".join(line for line in ajax_list().splitlines() if "AVG" not in line)
    assert missing_from_lists(ajax.AGENTS, listing) == ["AVG: not listed by `ajax list`"]


def test_the_api_page_names_every_export_and_only_those():
    """docs/api.md's table of what ``import ajax`` exports is ``ajax.__all__``, and every
    export other than ``AGENTS`` and ``__version__`` has its generated entry."""
    api = (DOCS / "api.md").read_text()
    rows = [line for line in api.split("\n## ")[0].splitlines() if line.startswith("| `")]
    tabled = set(re.findall(r"`(\w+)`", "\n".join(r.split("|")[1] for r in rows)))
    assert tabled == set(ajax.__all__)
    rendered = set(re.findall(r"^::: ajax\.(\w+)$", api, re.M))
    assert set(ajax.__all__) - rendered == {"AGENTS", "__version__"}


def test_the_training_page_names_the_agents_that_standardise_observations():
    """docs/training.md lists the agents with ``normalize_observations`` (TD-MPC2 as the
    papers write it): the list is every agent whose config has the field, and only those."""
    text = " ".join((DOCS / "training.md").read_text().split())
    listed = re.search(r"`normalize_observations` is set: ([^;)]+);", text).group(1)
    named = {word.replace("-", "") for word in re.findall(r"[\w-]+", listed)} - {"and"}
    having = {
        name
        for name, agent in ajax.AGENTS.items()
        if "normalize_observations" in {f.name for f in dataclasses.fields(agent.Config)}
    }
    assert named == having
