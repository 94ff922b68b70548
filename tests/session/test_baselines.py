"""Baselines (session/baselines.py) through a session and the real worker, on a git repository: which
jobs run (the worker's jobs are counted by the folder they ran in: the workspace, or a baseline's
scratch folder), what is cached, and the one sentence said when there is no delta.

Conv2d(3, c, 3) on (1, 3, 32, 32) has 28c parameters and c·900·54 FLOPs (docs of test_deltas.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from torchscan_lsp.session import baselines
from torchscan_lsp.session.controller import Session
from torchscan_lsp.worker import client as worker_client

MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, {channels}, 3)

    def forward(self, x):
        return self.conv(x)


# torchscan: input_shape=(3, 32, 32)
def build():
    {body}
"""


def model(channels: int = 8, body: str = "return Net()") -> str:
    return MODEL.format(channels=channels, body=body)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout


class Counted:
    """The worker, counting its jobs: ``"workspace"`` or ``"baseline"`` by where each ran."""

    def __init__(self, root: Path) -> None:
        self.root, self.jobs = str(root), []

    async def __call__(self, job: dict, **limits) -> dict:
        self.jobs.append("workspace" if job["workspace_root"] == self.root else "baseline")
        return await worker_client.run(job, **limits)

    def since(self, mark: int) -> list[str]:
        return self.jobs[mark:]


async def saved(session: Session, root: Path, text: str, name: str = "model.py"):
    path = root / name
    path.write_text(text, encoding="utf-8")
    document = session.open(str(path), str(root), text)
    session.analyse(document)
    await session.scheduler.wait_idle()
    return session.store.states_in(str(root), name)


def session_for(root: Path, **settings) -> tuple[Session, Counted]:
    counted = Counted(root)
    session = Session(trusted=True, run_job=counted)
    session.configure(str(root), settings)
    return session, counted


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "m"\n')
    (tmp_path / "model.py").write_text(model())
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


async def test_a_clean_tree_is_its_own_baseline(repo):
    session, counted = session_for(repo)
    try:
        (state,) = await saved(session, repo, model())
        # the files are as committed: the result is its own baseline, no second job
        assert counted.jobs == ["workspace"]
        assert state.comparison.ready and state.comparison.unchanged("operator_flops", "operator_macs")
        assert state.comparison.commit == git(repo, "rev-parse", "--short=7", "HEAD").strip()
        (state,) = await saved(session, repo, model(12))
        # ... and the baseline of every later edit, for that commit
        assert counted.jobs == ["workspace", "workspace"]
        assert (state.comparison.total("parameters").delta, state.comparison.total("operator_flops").delta) == (
            28 * 12 - 28 * 8, (12 - 8) * 900 * 54)
    finally:
        session.shutdown()


async def test_an_edited_tree_analyses_its_baseline_once_per_commit(repo):
    session, counted = session_for(repo)
    try:
        (state,) = await saved(session, repo, model(12))
        assert counted.jobs == ["workspace", "baseline"]     # HEAD's model, from a scratch folder
        assert (state.comparison.total("parameters").delta, state.comparison.total("operator_flops").delta) == (
            28 * 12 - 28 * 8, (12 - 8) * 900 * 54)

        mark = len(counted.jobs)
        (state,) = await saved(session, repo, model(16))     # the same commit and files: the baseline is kept
        assert counted.since(mark) == ["workspace"]
        assert state.comparison.total("parameters").delta == 28 * 16 - 28 * 8

        mark = len(counted.jobs)
        (state,) = await saved(session, repo, model().replace("class Net", "# one conv\nclass Net"))
        assert counted.since(mark) == ["workspace"]          # comment only: the kept baseline, no delta
        assert state.comparison.unchanged("operator_flops", "operator_macs")

        git(repo, "commit", "-q", "-am", "two")   # a new commit that holds the file as analysed: no job at all
        mark = len(counted.jobs)
        (state,) = await saved(session, repo, model().replace("class Net", "# one conv\nclass Net"))
        assert counted.since(mark) == [] and state.comparison.unchanged("operator_flops", "operator_macs")
        assert state.comparison.commit == git(repo, "rev-parse", "--short=7", "HEAD").strip()
    finally:
        session.shutdown()


async def test_no_delta_says_why(repo, tmp_path_factory):
    session, _ = session_for(repo)
    try:
        text = model() + "\n\n# torchscan: input_shape=(3, 8, 8)\ndef small():\n    return Net()\n"
        states = {s.key.name: s for s in await saved(session, repo, text)}
        assert states["small"].comparison.note == "`small` is new since HEAD"
        (fresh,) = await saved(session, repo, model(), "fresh.py")
        assert fresh.comparison.note == "`fresh.py` is new since HEAD"
    finally:
        session.shutdown()

    elsewhere = tmp_path_factory.mktemp("no-git")
    session, _ = session_for(elsewhere)
    try:
        (state,) = await saved(session, elsewhere, model())
        assert state.comparison.note == "the workspace is not in a git repository"
    finally:
        session.shutdown()

    session, _ = session_for(repo, compareWith="v9")
    try:
        (state,) = await saved(session, repo, model())
        assert state.comparison.note == "the repository has no commit named 'v9'"
        assert state.comparison.unknown_ref is True
    finally:
        session.shutdown()


async def test_a_baseline_that_fails_is_said_once_and_not_run_again(repo):
    git(repo, "rm", "-q", "model.py")
    (repo / "model.py").write_text(model(body='raise ValueError("not yet")'))
    git(repo, "add", "model.py")
    git(repo, "commit", "-q", "-m", "broken")
    session, counted = session_for(repo)
    try:
        (state,) = await saved(session, repo, model())
        assert counted.jobs == ["workspace", "baseline"]
        assert state.comparison.note.startswith("the target at HEAD could not be analysed (factory: ")
        assert "not yet" in state.comparison.note
        (state,) = await saved(session, repo, model(12))
        assert counted.jobs == ["workspace", "baseline", "workspace"]
    finally:
        session.shutdown()


async def test_save_compares_with_the_previous_analysis(repo):
    session, counted = session_for(repo, compareWith="save")
    try:
        (state,) = await saved(session, repo, model())
        assert state.comparison.note == "this is the target's first analysis in this session"
        (state,) = await saved(session, repo, model(12))
        assert state.comparison.label == "the last analysis" and state.comparison.total("parameters").delta == 112
        assert counted.jobs == ["workspace", "workspace"]     # no git, no baseline job
    finally:
        session.shutdown()


async def test_the_commit_s_file_is_scanned_once_while_its_text_is_the_same(repo, monkeypatch):
    scanned = []
    scan = baselines.find_targets
    monkeypatch.setattr(baselines, "find_targets", lambda text, rel: scanned.append(rel) or scan(text, rel))
    session, counted = session_for(repo)
    try:
        await saved(session, repo, model(12))                # HEAD's file read, scanned, its model analysed
        (repo / "notes.txt").write_text("a new commit, model.py as it was\n")
        git(repo, "add", "notes.txt")
        git(repo, "commit", "-q", "-m", "two")
        (state,) = await saved(session, repo, model(16))     # a new baseline, of the same text
        assert counted.jobs == ["workspace", "baseline", "workspace", "baseline"]
        assert scanned == ["model.py"]
        assert state.comparison.total("parameters").delta == 28 * 16 - 28 * 8
    finally:
        session.shutdown()
